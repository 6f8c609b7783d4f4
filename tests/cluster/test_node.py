"""ClusterNode: membership, view and controller together, against a real ZooKeeper. A topic
written as Kafka's old admin tools did (the assignment znode alone) gets its partition
states from the controller; leadership follows the brokers through controller failover;
the topic-level unclean.leader.election.enable overrides the broker default."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from functools import partial

import pytest
from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.cluster import paths
from tierlog.cluster.node import ClusterNode
from tierlog.cluster.settings import ClusterSettings
from tierlog.cluster.znodes import (
    LEADER_RECOVERY_RECOVERING,
    NO_LEADER,
    PartitionState,
    TopicAssignment,
    TopicConfigOverrides,
)


@pytest.fixture
def nodes(
    cluster_settings: Callable[..., ClusterSettings],
) -> Iterator[Callable[..., ClusterNode]]:
    made: list[ClusterNode] = []

    def make(broker_id: int, unclean: bool = False) -> ClusterNode:
        settings = dataclasses.replace(
            cluster_settings(broker_id), unclean_leader_election_enable=unclean
        )
        node = ClusterNode(settings)
        made.append(node)
        node.start()
        return node

    yield make
    for node in made:
        node.close()


def _state(zk: KazooClient, topic: str, p: int) -> PartitionState | None:
    stat = zk.exists(paths.partition_state(topic, p))
    return (
        None if stat is None else PartitionState.decode(zk.get(paths.partition_state(topic, p))[0])
    )


def test_leadership_follows_brokers_through_controller_failover(
    nodes: Callable[..., ClusterNode], kazoo_client: KazooClient
) -> None:
    n1, n2, n3 = nodes(1), nodes(2), nodes(3)
    assert n1.controller is not None and n2.controller is None
    kazoo_client.create(paths.topic("t"), TopicAssignment({0: (1, 2, 3), 1: (2, 3, 1)}).encode())
    wait_until(lambda: _state(kazoo_client, "t", 1) is not None, 10, what="states written")
    first = _state(kazoo_client, "t", 0)
    assert first is not None and (first.leader, first.leader_epoch, first.isr) == (1, 0, (1, 2, 3))

    n1.close()  # the controller and leader of t-0 goes
    wait_until(lambda: n2.controller is not None or n3.controller is not None, 10, what="ctl")
    controller = n2.controller or n3.controller
    assert controller is not None
    new_epoch = controller.epoch
    wait_until(
        lambda: _state(kazoo_client, "t", 0) == PartitionState(2, 1, (2, 3), new_epoch),
        10,
        what="t-0 led by 2",
    )
    wait_until(
        lambda: _state(kazoo_client, "t", 1) == PartitionState(2, 1, (2, 3), new_epoch),
        10,
        what="t-1 loses 1 from its ISR",
    )


def test_topic_level_unclean_election(
    nodes: Callable[..., ClusterNode], kazoo_client: KazooClient
) -> None:
    n1, n2 = nodes(1), nodes(2)
    kazoo_client.create(
        paths.topic_config("dirty"),
        TopicConfigOverrides({"unclean.leader.election.enable": "true"}).encode(),
    )
    for topic in ("clean", "dirty"):
        kazoo_client.create(paths.topic(topic), TopicAssignment({0: (2, 1)}).encode())
    for topic in ("clean", "dirty"):
        wait_until(partial(_isr, kazoo_client, topic), 10, what=f"{topic} state")
        assert _isr(kazoo_client, topic) == (2, 1)
    # 1 leaves the ISRs, then 2 (the last member) dies: nobody in sync is left.
    n1.close()
    wait_until(lambda: n2.controller is not None, 10, what="2 is controller")
    wait_until(
        lambda: _isr(kazoo_client, "clean") == _isr(kazoo_client, "dirty") == (2,),
        10,
        what="both ISRs shrunk to 2",
    )
    n2.close()
    n1 = nodes(1)
    wait_until(lambda: n1.controller is not None, 10, what="1 is controller")

    def dirty_led_by_1() -> PartitionState | None:
        s = _state(kazoo_client, "dirty", 0)
        return s if s is not None and s.leader == 1 else None

    dirty = wait_until(dirty_led_by_1, 10, what="unclean election for the topic that allows it")
    assert dirty is not None
    assert dirty.isr == (1,) and dirty.leader_recovery_state == LEADER_RECOVERY_RECOVERING
    clean = _state(kazoo_client, "clean", 0)
    assert clean is not None and clean.leader == NO_LEADER and clean.isr == (2,)


def _isr(zk: KazooClient, topic: str) -> tuple[int, ...] | None:
    state = _state(zk, topic, 0)
    return None if state is None else state.isr


def test_broker_level_unclean_election_with_a_topic_override_and_its_data_loss(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """Real brokers with ``unclean.leader.election.enable=true`` in the broker config: when
    a partition's only in-sync replica dies, the controller makes the live out-of-sync
    replica leader (RECOVERING) without being asked, losing the records only the dead
    leader had (Kafka's data-loss semantics, docs/operations.md); a topic overriding it with
    ``false`` stays offline instead."""
    brokers = c.start_cluster(
        broker_factory,
        zk_connect,
        kazoo_client,
        extra={"unclean.leader.election.enable": "true", "auto.leader.rebalance.enable": "false"},
    )
    c.create_topic(brokers, kazoo_client, "lossy", [[1, 2]], {"min.insync.replicas": "1"})
    c.create_topic(
        brokers,
        kazoo_client,
        "strict",
        [[1, 2]],
        {"min.insync.replicas": "1", "unclean.leader.election.enable": "false"},
    )
    c.produce(c.bootstrap(brokers), "lossy", [b"replicated"])
    wait_until(lambda: b"replicated" in _segments(brokers[2], "lossy"), 20, what="follower has it")
    brokers[2].stop()
    for topic in ("lossy", "strict"):
        wait_until(
            partial(c.state_when, kazoo_client, topic, lambda s: list(s.isr) == [1]),
            20,
            what=f"{topic}: ISR shrunk to the leader",
        )
    c.produce(brokers[1].bootstrap, "lossy", [b"only-on-1"])
    brokers[1].kill()
    brokers[2].start()
    elected = wait_until(
        lambda: c.state_when(kazoo_client, "lossy", lambda s: s.leader == 2),
        30,
        what="an unclean leader for the lossy topic",
    )
    assert elected.leader_recovery_state == LEADER_RECOVERY_RECOVERING
    # the controller writes each partition's new state in turn: wait for the strict one's
    strict = wait_until(
        lambda: c.state_when(kazoo_client, "strict", lambda s: s.leader == NO_LEADER),
        30,
        what="the strict topic offline",
    )
    assert list(strict.isr) == [1]
    c.produce(brokers[2].bootstrap, "lossy", [b"after"])
    assert c.consume(brokers[2].bootstrap, "lossy", 0, 2) == [b"replicated", b"after"]


def _segments(broker: BrokerProcess, topic: str) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((broker.log_dir / f"{topic}-0").glob("*.log")))
