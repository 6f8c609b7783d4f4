"""Replication throttles (KIP-73): Kafka's ``ReplicationQuotaManager``, one for the leader
side and one for the follower side of this broker.

A quota has a bound (``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate``, bytes per second, dynamic broker configs), a rate
meter and the set of throttled partitions (from the topic configs
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``:
``*``, or ``partition:broker`` entries naming this broker). The meter is Kafka's
``SimpleRate`` over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``: the bytes of the live samples divided by
``max(now - oldest sample start, one window)``. The quota is exceeded while that rate is
above the bound. Who records and who skips a partition is the caller's (the leader's Fetch
handler, the follower's fetcher), as in Kafka.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tierlog.config.definitions import LONG_MAX
from tierlog.simple_rate import SimpleRate

#: Every partition of the topic (the ``*`` of the topic config).
ALL_PARTITIONS: frozenset[int] = frozenset({-1})


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def throttled_partitions(value: Iterable[str], broker_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas list names for ``broker_id`` (Kafka's
    ``parseThrottledPartitions``): all of them for ``*``."""
    items = [item.strip() for item in value if item.strip()]
    if items == ["*"]:
        return ALL_PARTITIONS
    out: set[int] = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One side's quota; thread-safe (the metrics endpoint reads it from its thread)."""

    def __init__(
        self,
        bound: float,
        num_windows: int,
        window_s: int,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.bound = float(bound)
        self._clock = clock_ms
        self._lock = threading.Lock()
        self._meter = SimpleRate(num_windows, window_s * 1000)
        self._throttled: dict[str, frozenset[int]] = {}
        #: Bytes recorded since start (the throttled partitions' replication traffic).
        self.recorded_total = 0.0

    # ---- throttled partitions -------------------------------------------------------------
    def mark_throttled(self, topic: str, partitions: frozenset[int]) -> None:
        """``topic``'s throttled partitions on this side (empty: none)."""
        with self._lock:
            if partitions:
                self._throttled[topic] = partitions
            else:
                self._throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        held = self._throttled.get(topic)
        return held is not None and (held is ALL_PARTITIONS or partition in held)

    # ---- rate ---------------------------------------------------------------------------
    def update_bound(self, bound: float) -> None:
        """A new rate (a dynamic change); the samples stay, so the rate is continuous."""
        self.bound = float(bound)

    def record(self, nbytes: float) -> None:
        now = self._clock()
        with self._lock:
            self.recorded_total += nbytes
            self._meter.record(nbytes, now)

    def rate(self) -> float:
        """Bytes per second over the live samples."""
        now = self._clock()
        with self._lock:
            return self._meter.measure(now)[0]

    def is_exceeded(self) -> bool:
        """Kafka's ``isQuotaExceeded``: the measured rate is above the bound (never with the
        default bound, Long.MAX_VALUE)."""
        if self.bound >= LONG_MAX:
            return False
        return self.rate() > self.bound


@dataclass
class ReplicationQuotas:
    """Both sides of this broker, owned by the ``ReplicaManager``."""

    broker_id: int
    leader: ReplicationQuota
    follower: ReplicationQuota

    def topic_config(
        self, topic: str, leader_list: Iterable[str], follower_list: Iterable[str]
    ) -> None:
        """A topic's throttled-replicas configs (created, altered or deleted: empty lists)."""
        self.leader.mark_throttled(topic, throttled_partitions(leader_list, self.broker_id))
        self.follower.mark_throttled(topic, throttled_partitions(follower_list, self.broker_id))
