"""Kafka's leader-imbalance rule (``cluster.rebalance.imbalanced``; spec Z-11, checklist 46),
and the controller applying it to real brokers."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
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


def test_auto_rebalance_returns_leadership_to_the_preferred_replica(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """``auto.leader.rebalance.enable`` with a 1 s check: after a controlled shutdown moved
    leadership off broker 1 and it came back in sync, the controller alone gives it back
    (broker 1's imbalance is 100% > 10%)."""
    brokers = c.start_cluster(
        broker_factory,
        zk_connect,
        kazoo_client,
        extra={"leader.imbalance.check.interval.seconds": "1"},
    )
    c.create_topic(brokers, kazoo_client, "rb", [[1, 2, 3]])
    first = c.state(kazoo_client, "rb")
    assert first is not None and first.leader == 1
    assert brokers[1].stop() == 0
    moved = wait_until(
        lambda: c.state_when(kazoo_client, "rb", lambda s: s.leader != 1),
        20,
        what="leadership moved off broker 1",
    )
    brokers[1].start()
    back = wait_until(
        lambda: c.state_when(kazoo_client, "rb", lambda s: s.leader == 1),
        30,
        what="leadership back on the preferred replica",
    )
    assert back.leader_epoch > moved.leader_epoch
    assert 1 in back.isr
