"""The replication throttles' metrics (Kafka's ``LeaderReplication`` / ``FollowerReplication``
byte rates), read from the quotas when Prometheus scrapes."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tierlog.replication.quota import ReplicationQuotas


class ReplicationQuotaCollector(Collector):
    def __init__(self, quotas: ReplicationQuotas) -> None:
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        sides = (("leader", self._quotas.leader), ("follower", self._quotas.follower))
        total = CounterMetricFamily(
            "tierlog_replication_throttled_bytes",
            "Replication bytes of throttled replicas counted against the replication throttle.",
            labels=["side"],
        )
        rate = GaugeMetricFamily(
            "tierlog_replication_throttled_rate_bytes",
            "Measured rate of throttled replicas' replication, bytes per second.",
            labels=["side"],
        )
        for side, quota in sides:
            total.add_metric([side], quota.recorded_total)
            rate.add_metric([side], quota.rate())
        yield total
        yield rate
