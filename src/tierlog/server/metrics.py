"""Prometheus metrics of the broker, served over HTTP at ``metrics.listener``.

Per-request metrics are plain counters/histograms. Per-partition gauges are produced by a
collector that reads the logs only when Prometheus scrapes, so the request path never pays
for them. Each broker uses its own registry (tests run several brokers in one process).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class PartitionStats:
    topic: str
    partition: int
    size_bytes: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True)
class MetricDoc:
    name: str
    kind: str
    labels: str
    help: str


#: Every metric the broker exports (rendered into docs/operations.md).
METRIC_DOCS: tuple[MetricDoc, ...] = (
    MetricDoc("tierlog_requests_total", "counter", "api", "Requests handled, per API."),
    MetricDoc(
        "tierlog_request_latency_seconds",
        "histogram",
        "api",
        "Time from decoding a request to having its response ready (includes Fetch waits).",
    ),
    MetricDoc("tierlog_bytes_in_total", "counter", "", "Request bytes received (with framing)."),
    MetricDoc("tierlog_bytes_out_total", "counter", "", "Response bytes sent (with framing)."),
    MetricDoc(
        "tierlog_fetch_records_sendfile_bytes_total",
        "counter",
        "",
        "Record bytes of local-log Fetch responses sent from the file with sendfile(2).",
    ),
    MetricDoc(
        "tierlog_fetch_records_copied_bytes_total",
        "counter",
        "",
        "Record bytes of local-log Fetch responses read into memory instead (a transport "
        "that is not plain TCP, or a file system without sendfile).",
    ),
    MetricDoc(
        "tierlog_idle_connections_closed_total",
        "counter",
        "",
        "Client connections closed after connections.max.idle.ms without I/O progress "
        "(no request being handled, no bytes read, none taken by the client).",
    ),
    MetricDoc(
        "tierlog_replication_throttled_bytes_total",
        "counter",
        "side",
        "Cluster mode: replication bytes of throttled replicas counted against the replication "
        "throttle, side leader (sent to followers) or follower (fetched from leaders).",
    ),
    MetricDoc(
        "tierlog_replication_throttled_rate_bytes",
        "gauge",
        "side",
        "Cluster mode: the replication throttle's measured rate of throttled replicas, bytes "
        "per second (it holds back followers outside the ISR while above the side's "
        "*.replication.throttled.rate).",
    ),
    MetricDoc(
        "tierlog_connections_refused_total",
        "counter",
        "reason",
        "Connections closed right after the accept because a limit was reached: reason "
        "max_connections_per_ip (max.connections.per.ip and its overrides), max_connections, "
        "connection_creation_rate (the ip entity's client quota; closed after its "
        "throttle time), or max_connection_creation_rate (set to 0: no new connection).",
    ),
    MetricDoc(
        "tierlog_queued_request_bytes",
        "gauge",
        "",
        "Bytes of requests read but not yet handled, across all connections (bounded by "
        "queued.max.request.bytes when set; counted only then).",
    ),
    MetricDoc(
        "tierlog_connection_accept_throttle_seconds_total",
        "counter",
        "",
        "Seconds new connections were held unread before being served because the broker "
        "accepted them faster than max.connection.creation.rate (Kafka's acceptor blocks "
        "for that time; its connection-accept-throttle-time).",
    ),
    MetricDoc(
        "tierlog_client_quota_throttle_seconds_total",
        "counter",
        "quota",
        "Throttle time given to clients over a quota (KIP-219), per quota: Produce "
        "(producer_byte_rate), Fetch (consumer_byte_rate) or Request (request_percentage).",
    ),
    MetricDoc(
        "tierlog_client_quota_throttled_responses_total",
        "counter",
        "quota",
        "Responses that carried a throttle time, per quota (the larger one when both were over).",
    ),
    MetricDoc(
        "tierlog_log_size_bytes", "gauge", "topic, partition", "Bytes of local log segments."
    ),
    MetricDoc(
        "tierlog_log_start_offset", "gauge", "topic, partition", "Log start offset (both tiers)."
    ),
    MetricDoc("tierlog_log_end_offset", "gauge", "topic, partition", "Log end offset."),
    # tiered storage (tierlog.tiered.manager.metrics); requests count RSM calls
    MetricDoc(
        "tierlog_remote_copy_requests_total", "counter", "topic, partition", "Segment copies."
    ),
    MetricDoc("tierlog_remote_copy_bytes_total", "counter", "topic, partition", "Bytes copied."),
    MetricDoc("tierlog_remote_copy_errors_total", "counter", "topic, partition", "Failed copies."),
    MetricDoc(
        "tierlog_remote_fetch_requests_total", "counter", "topic, partition", "Remote reads."
    ),
    MetricDoc(
        "tierlog_remote_fetch_bytes_total", "counter", "topic, partition", "Bytes read remotely."
    ),
    MetricDoc(
        "tierlog_remote_fetch_ready_total",
        "counter",
        "topic, partition",
        "Remote reads answered on the event loop from bytes a parked stream held "
        "(no reader-pool hand-off).",
    ),
    MetricDoc(
        "tierlog_remote_fetch_expires_total",
        "counter",
        "topic, partition",
        "Remote reads a Fetch stopped waiting for after `remote.fetch.max.wait.ms` (Kafka's "
        "DelayedRemoteFetch `ExpiresPerSec`), or after `remote.fetch.partial.wait.ms` once "
        "other remote reads of the Fetch had records; the read goes on, and the next Fetch at "
        "that offset gets what it read.",
    ),
    MetricDoc(
        "tierlog_remote_fetch_taken_over_total",
        "counter",
        "topic, partition",
        "Remote reads given up on that a later Fetch at the same offset waited for instead "
        "of reading the segment again.",
    ),
    MetricDoc(
        "tierlog_remote_fetch_errors_total", "counter", "topic, partition", "Failed remote reads."
    ),
    MetricDoc(
        "tierlog_remote_delete_requests_total", "counter", "topic, partition", "Segment deletes."
    ),
    MetricDoc(
        "tierlog_remote_delete_errors_total", "counter", "topic, partition", "Failed deletes."
    ),
    MetricDoc(
        "tierlog_build_remote_log_aux_state_requests_total",
        "counter",
        "topic, partition",
        "Follower bootstraps from the remote tier (Kafka's BuildRemoteLogAuxStateRequestsPerSec).",
    ),
    MetricDoc(
        "tierlog_build_remote_log_aux_state_errors_total",
        "counter",
        "topic, partition",
        "Failed follower bootstraps from the remote tier (BuildRemoteLogAuxStateErrorsPerSec).",
    ),
    MetricDoc(
        "tierlog_remote_copy_lag_bytes",
        "gauge",
        "topic, partition",
        "Sealed local bytes not yet copied.",
    ),
    MetricDoc(
        "tierlog_remote_copy_lag_segments",
        "gauge",
        "topic, partition",
        "Sealed local segments not yet copied.",
    ),
    MetricDoc(
        "tierlog_remote_log_size_bytes", "gauge", "topic, partition", "Bytes of remote segments."
    ),
    MetricDoc(
        "tierlog_remote_log_metadata_count", "gauge", "topic, partition", "Remote segments listed."
    ),
    MetricDoc(
        "tierlog_remote_copy_throttle_time_ms",
        "summary",
        "",
        "Time copy tasks waited on remote.log.manager.copy.max.bytes.per.second.",
    ),
    MetricDoc(
        "tierlog_remote_fetch_throttle_time_ms",
        "summary",
        "",
        "Throttle time of remote reads shed by remote.log.manager.fetch.max.bytes.per.second.",
    ),
    MetricDoc("tierlog_remote_index_cache_hits_total", "counter", "", "Remote index cache hits."),
    MetricDoc(
        "tierlog_remote_index_cache_misses_total", "counter", "", "Remote index cache misses."
    ),
    MetricDoc(
        "tierlog_remote_index_cache_evictions_total", "counter", "", "Remote index evictions."
    ),
    MetricDoc(
        "tierlog_remote_index_cache_size_bytes", "gauge", "", "Bytes of cached remote indexes."
    ),
    # fetch (tierlog.server.fetch_metrics)
    MetricDoc("tierlog_fetch_sessions", "gauge", "", "Incremental fetch sessions in the cache."),
    MetricDoc(
        "tierlog_fetch_session_partitions_cached",
        "gauge",
        "",
        "Partitions held by all incremental fetch sessions.",
    ),
    MetricDoc("tierlog_fetch_session_evictions_total", "counter", "", "Fetch sessions evicted."),
    MetricDoc(
        "tierlog_fetch_incremental_requests_total",
        "counter",
        "",
        "Fetches answered from a session.",
    ),
    MetricDoc(
        "tierlog_fetch_purgatory_waits_total",
        "counter",
        "",
        "Fetches that waited in the purgatory for data or fetch.max.wait.ms.",
    ),
    # log cleaner (tierlog.server.log_cleaner)
    MetricDoc(
        "tierlog_log_cleaner_max_dirty_percent",
        "gauge",
        "",
        "Dirty ratio of the dirtiest compacted log at the last check, in percent.",
    ),
    MetricDoc(
        "tierlog_log_cleaner_recopy_percent",
        "gauge",
        "",
        "Bytes written over bytes read by the last cleaning, in percent.",
    ),
    MetricDoc(
        "tierlog_log_cleaner_time_since_last_run_ms",
        "gauge",
        "",
        "Milliseconds since a cleaner thread last looked for a log to clean.",
    ),
    MetricDoc(
        "tierlog_log_cleaner_uncleanable_partitions_count",
        "gauge",
        "",
        "Partitions whose cleaning failed on bad data (still served, not cleaned).",
    ),
    MetricDoc(
        "tierlog_log_cleaner_max_compaction_delay_secs",
        "gauge",
        "",
        "How far past max.compaction.lag.ms the most overdue dirty segment is.",
    ),
    MetricDoc(
        "tierlog_log_cleaner_max_clean_time_secs", "gauge", "", "Duration of the last cleaning."
    ),
    MetricDoc(
        "tierlog_log_cleaner_dirty_ratio",
        "gauge",
        "topic, partition",
        "Dirty bytes over all bytes below the first uncleanable offset, per compacted log "
        "(this broker's replica); `topics describe --metrics-url` shows it.",
    ),
)

_LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class _PartitionCollector(Collector):
    def __init__(self, source: Callable[[], Iterable[PartitionStats]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "tierlog_log_size_bytes", "Bytes of local log segments.", labels=labels
        )
        start = GaugeMetricFamily(
            "tierlog_log_start_offset", "Log start offset (both tiers).", labels=labels
        )
        end = GaugeMetricFamily("tierlog_log_end_offset", "Log end offset.", labels=labels)
        try:
            stats = list(self._source())
        except Exception:  # a scrape racing with shutdown or a topic deletion
            stats = []
        for s in stats:
            lv = [s.topic, str(s.partition)]
            size.add_metric(lv, s.size_bytes)
            start.add_metric(lv, s.log_start_offset)
            end.add_metric(lv, s.log_end_offset)
        yield size
        yield start
        yield end


class _ProcessRegistryBridge:
    """Exposes the process-wide default registry through the broker's own registry.

    Storage plugins are loaded by name and know nothing of the broker, so they register
    their collectors (``tierlog_objectstore_*``) in prometheus_client's default registry,
    as does the client library's process collector (CPU, RSS, open fds). One scrape of
    ``/metrics`` must show all of them.
    """

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_ProcessRegistryBridge())
        self.requests = Counter(
            "tierlog_requests", "Requests handled, per API.", ["api"], registry=self.registry
        )
        self.latency = Histogram(
            "tierlog_request_latency_seconds",
            "Time from decoding a request to having its response ready.",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.bytes_in = Counter(
            "tierlog_bytes_in", "Request bytes received.", registry=self.registry
        )
        self.bytes_out = Counter(
            "tierlog_bytes_out", "Response bytes sent.", registry=self.registry
        )
        self.records_sendfile = Counter(
            "tierlog_fetch_records_sendfile_bytes",
            "Record bytes of local-log Fetch responses sent with sendfile(2).",
            registry=self.registry,
        )
        self.records_copied = Counter(
            "tierlog_fetch_records_copied_bytes",
            "Record bytes of local-log Fetch responses read into memory instead.",
            registry=self.registry,
        )
        self.idle_connections_closed = Counter(
            "tierlog_idle_connections_closed",
            "Client connections closed after connections.max.idle.ms without I/O progress.",
            registry=self.registry,
        )
        self.connections_refused = Counter(
            "tierlog_connections_refused",
            "Connections closed right after the accept because a limit was reached.",
            ["reason"],
            registry=self.registry,
        )
        self.queued_request_bytes = Gauge(
            "tierlog_queued_request_bytes",
            "Bytes of requests read but not yet handled, across all connections.",
            registry=self.registry,
        )
        self.connection_accept_throttle_seconds = Counter(
            "tierlog_connection_accept_throttle_seconds",
            "Time new connections were held unread by max.connection.creation.rate.",
            registry=self.registry,
        )
        self.quota_throttle_seconds = Counter(
            "tierlog_client_quota_throttle_seconds",
            "Throttle time given to clients over a quota, per quota.",
            ["quota"],
            registry=self.registry,
        )
        self.quota_throttled = Counter(
            "tierlog_client_quota_throttled_responses",
            "Responses that carried a throttle time, per quota.",
            ["quota"],
            registry=self.registry,
        )
        self._children: dict[str, tuple[Any, Any]] = {}
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def observe_request(self, api: str, seconds: float) -> None:
        pair = self._children.get(api)
        if pair is None:
            pair = self._children[api] = (self.requests.labels(api), self.latency.labels(api))
        pair[0].inc()
        pair[1].observe(seconds)

    def add_partition_source(self, source: Callable[[], Iterable[PartitionStats]]) -> None:
        self.registry.register(_PartitionCollector(source))

    def serve(self, host: str, port: int) -> int:
        """Start the HTTP endpoint on its own thread; returns the bound port."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        self._server, self._thread = server, thread
        return int(server.server_address[1])

    def stop(self) -> None:
        """Stop the endpoint at once. Its thread waits in ``select`` with a 0.5 s timeout
        (``serve_forever``'s default, which ``start_http_server`` keeps) and looks at the
        stop request only between waits, so a plain ``shutdown`` added up to half a second
        to every broker stop. Shutting the listening socket's receive side first makes the
        socket readable (each accept then fails at once), so the thread sees the request
        on its next turn."""
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.socket.shutdown(socket.SHUT_RD)
            self._server.shutdown()
            self._server.server_close()
            self._server = None
