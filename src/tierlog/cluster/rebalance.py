"""The automatic preferred-leader rebalance (spec/kafka-replication.md Z-11; Kafka's
``KafkaController.checkAndTriggerAutoLeaderRebalance``), as a pure choice.

For each broker B, the partitions that prefer it (``A[0] == B``) and are led by another
broker make its imbalance: their count over the count of partitions preferring B. Above
``leader.imbalance.per.broker.percentage`` / 100, each of them gets a preferred election,
provided B is live and in the partition's ISR. Nothing is chosen while any reassignment is in
progress, and topics queued for deletion are left out. The controller runs the check every
``leader.imbalance.check.interval.seconds`` while ``auto.leader.rebalance.enable`` is true.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from tierlog.cluster.cluster_view import PartitionInfo


def imbalanced(
    partitions: Iterable[PartitionInfo],
    live: Collection[int],
    percentage: int,
    deleting: Collection[str] = (),
) -> list[PartitionInfo]:
    """The partitions whose preferred leader should be elected now."""
    candidates = [p for p in partitions if p.topic not in deleting and p.replicas]
    if any(p.adding or p.removing for p in candidates):
        return []
    by_preferred: dict[int, list[PartitionInfo]] = {}
    for p in candidates:
        if p.state is not None:
            by_preferred.setdefault(p.replicas[0], []).append(p)
    chosen: list[PartitionInfo] = []
    for broker, preferring in sorted(by_preferred.items()):
        elsewhere = [p for p in preferring if p.state is not None and p.state.leader != broker]
        if len(elsewhere) * 100 <= percentage * len(preferring):
            continue
        chosen.extend(
            p for p in elsewhere if broker in live and p.state is not None and broker in p.state.isr
        )
    return chosen
