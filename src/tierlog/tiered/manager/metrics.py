"""Prometheus metrics of the remote tier. Names are fixed: dashboards and tests rely on them.

Request counters count RSM calls. Each broker passes its own registry (tests run several
brokers in one process). Index-cache counters are read from the cache's own counters at
scrape time so the lookup path pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Summary
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tierlog.tiered.manager.index_cache import CacheStats

__all__ = ["RemoteMetrics"]

_PL = ("topic", "partition")


class _IndexCacheCollector(Collector):
    def __init__(self, source: Callable[[], tuple[CacheStats, int] | None]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        got = self._source()
        stats, size = got if got is not None else (CacheStats(), 0)
        for name, value, doc in (
            ("hits", stats.hits, "Remote index cache lookups served from the cache."),
            ("misses", stats.misses, "Remote index cache lookups that loaded the indexes."),
            ("evictions", stats.evictions, "Remote index cache entries evicted."),
        ):
            c = CounterMetricFamily(f"tierlog_remote_index_cache_{name}", doc)
            c.add_metric([], value)
            yield c
        g = GaugeMetricFamily("tierlog_remote_index_cache_size_bytes", "Bytes of cached indexes.")
        g.add_metric([], size)
        yield g


class RemoteMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry

        def per_partition_counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, _PL, registry=r)

        def per_partition_gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, _PL, registry=r)

        self.copy_requests = per_partition_counter(
            "tierlog_remote_copy_requests", "Segment copies asked of the RSM."
        )
        self.copy_bytes = per_partition_counter(
            "tierlog_remote_copy_bytes", "Segment bytes copied to the remote tier."
        )
        self.copy_errors = per_partition_counter(
            "tierlog_remote_copy_errors", "Segment copies that failed."
        )
        self.fetch_requests = per_partition_counter(
            "tierlog_remote_fetch_requests", "Remote reads asked of the RSM."
        )
        self.fetch_bytes = per_partition_counter(
            "tierlog_remote_fetch_bytes", "Bytes returned by remote reads."
        )
        self.fetch_ready = per_partition_counter(
            "tierlog_remote_fetch_ready",
            "Remote reads answered on the event loop from bytes a parked stream held.",
        )
        self.fetch_expires = per_partition_counter(
            "tierlog_remote_fetch_expires",
            "Remote reads a Fetch stopped waiting for after remote.fetch.max.wait.ms, or "
            "remote.fetch.partial.wait.ms once others had records "
            "(DelayedRemoteFetchMetrics ExpiresPerSec).",
        )
        self.fetch_taken_over = per_partition_counter(
            "tierlog_remote_fetch_taken_over",
            "Remote reads given up on that a later Fetch at the same offset waited for "
            "instead of reading again.",
        )
        self.fetch_errors = per_partition_counter(
            "tierlog_remote_fetch_errors", "Remote reads that failed."
        )
        self.delete_requests = per_partition_counter(
            "tierlog_remote_delete_requests", "Segment deletes asked of the RSM."
        )
        self.delete_errors = per_partition_counter(
            "tierlog_remote_delete_errors", "Segment deletes that failed."
        )
        self.build_aux_state_requests = per_partition_counter(
            "tierlog_build_remote_log_aux_state_requests",
            "Follower bootstraps from the remote tier (BuildRemoteLogAuxStateRequestsPerSec).",
        )
        self.build_aux_state_errors = per_partition_counter(
            "tierlog_build_remote_log_aux_state_errors",
            "Follower bootstraps from the remote tier that failed "
            "(BuildRemoteLogAuxStateErrorsPerSec).",
        )
        self.copy_lag_bytes = per_partition_gauge(
            "tierlog_remote_copy_lag_bytes", "Sealed local bytes not yet copied."
        )
        self.copy_lag_segments = per_partition_gauge(
            "tierlog_remote_copy_lag_segments", "Sealed local segments not yet copied."
        )
        self.log_size_bytes = per_partition_gauge(
            "tierlog_remote_log_size_bytes", "Bytes of listed remote segments."
        )
        self.metadata_count = per_partition_gauge(
            "tierlog_remote_log_metadata_count", "Listed remote segments."
        )
        self.copy_throttle_ms = Summary(
            "tierlog_remote_copy_throttle_time_ms",
            "Time copy tasks waited on the copy quota.",
            registry=r,
        )
        self.fetch_throttle_ms = Summary(
            "tierlog_remote_fetch_throttle_time_ms",
            "Throttle time of remote reads shed by the fetch quota.",
            registry=r,
        )
        self._cache_source: Callable[[], tuple[CacheStats, int] | None] = lambda: None
        # A lambda, not the bound value: attach_index_cache replaces the source later.
        r.register(_IndexCacheCollector(lambda: self._cache_source()))  # noqa: PLW0108

    def attach_index_cache(self, source: Callable[[], tuple[CacheStats, int] | None]) -> None:
        self._cache_source = source

    def remove_partition(self, topic: str, partition: int) -> None:
        labels = (topic, str(partition))
        for gauge in (
            self.copy_lag_bytes,
            self.copy_lag_segments,
            self.log_size_bytes,
            self.metadata_count,
        ):
            try:
                gauge.remove(*labels)
            except KeyError:
                pass

    def value(self, name: str, **labels: str | int) -> float:
        """Sum of the matching samples (tests and the CLI); 0 when no series matches."""
        want = {k: str(v) for k, v in labels.items()}
        total = 0.0
        for metric in self.registry.collect():
            for s in metric.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in want.items()):
                    total += float(s.value)
        return total
