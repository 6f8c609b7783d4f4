"""Fetch's gauges and counters, read from their owners when Prometheus scrapes.

Kafka's fetch session metrics (``NumIncrementalFetchSessions``,
``NumIncrementalFetchPartitionsCached``, ``IncrementalFetchSessionEvictionsPerSec``) come
from the ``FetchSessionCache``; the count of fetches that waited in the purgatory shows
whether a request was answered at once (a remote read, for one) or parked until data or
``fetch.max.wait.ms``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tierlog.server.fetch_sessions import FetchSessionCache
from tierlog.server.purgatory import FetchPurgatory


class FetchCollector(Collector):
    def __init__(self, sessions: FetchSessionCache, purgatory: FetchPurgatory) -> None:
        self._sessions = sessions
        self._purgatory = purgatory

    def collect(self) -> Iterator[Metric]:
        s = self._sessions
        sessions = GaugeMetricFamily(
            "tierlog_fetch_sessions", "Incremental fetch sessions in the cache."
        )
        sessions.add_metric([], len(s))
        yield sessions
        cached = GaugeMetricFamily(
            "tierlog_fetch_session_partitions_cached",
            "Partitions held by all incremental fetch sessions.",
        )
        cached.add_metric([], s.partitions_cached)
        yield cached
        for name, doc, value in (
            ("tierlog_fetch_session_evictions", "Fetch sessions evicted.", s.evictions),
            (
                "tierlog_fetch_incremental_requests",
                "Fetches answered from a session.",
                s.incremental_fetches,
            ),
            (
                "tierlog_fetch_purgatory_waits",
                "Fetches that waited in the purgatory for data or fetch.max.wait.ms.",
                self._purgatory.waits,
            ),
        ):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], value)
            yield c
