"""Kafka's leader-imbalance rule (``cluster.rebalance.imbalanced``; spec Z-11, checklist 46)."""

from __future__ import annotations

from tierlog.cluster.cluster_view import PartitionInfo
from tierlog.cluster.rebalance import imbalanced
from tierlog.cluster.znodes import PartitionState


def _p(index: int, replicas: tuple[int, ...], leader: int, topic: str = "t") -> PartitionInfo:
    return PartitionInfo(topic, index, replicas, state=PartitionState(leader, 1, replicas, 1))


def test_a_broker_above_the_percentage_gets_its_partitions_back() -> None:
    """Broker 1 prefers 4 partitions and leads 2 (50% > 10%): both others are chosen;
    broker 2 prefers 1 and leads it."""
    parts = [
        _p(0, (1, 2), 1),
        _p(1, (1, 2), 2),
        _p(2, (1, 2), 2),
        _p(3, (1, 2), 1),
        _p(4, (2, 1), 2),
    ]
    assert [p.partition for p in imbalanced(parts, {1, 2}, 10)] == [1, 2]


def test_imbalance_at_or_below_the_percentage_is_left_alone() -> None:
    parts = [_p(i, (1, 2), 2 if i == 0 else 1) for i in range(10)]
    assert imbalanced(parts, {1, 2}, 10) == [], "1 of 10 is exactly 10%: not above"
    assert [p.partition for p in imbalanced(parts, {1, 2}, 9)] == [0]


def test_nothing_moves_while_a_reassignment_runs_or_the_preferred_is_out() -> None:
    moving = PartitionInfo("t", 9, (1, 2, 3), adding=(3,), state=PartitionState(1, 1, (1, 2), 1))
    parts = [_p(0, (1, 2), 2)]
    assert imbalanced([*parts, moving], {1, 2, 3}, 10) == []
    assert imbalanced(parts, {2}, 10) == [], "preferred leader not live"
    out_of_isr = PartitionInfo("t", 0, (1, 2), state=PartitionState(2, 1, (2,), 1))
    assert imbalanced([out_of_isr], {1, 2}, 10) == [], "preferred leader not in the ISR"
    assert imbalanced(parts, {1, 2}, 10, deleting={"t"}) == []
