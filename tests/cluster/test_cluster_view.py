"""ClusterView: a broker's watch-fed picture of the cluster, against a real ZooKeeper.
It follows brokers, the controller, topics and partition states, applies partition states
by epoch only (a stale write never moves it back), and handles deletion and re-creation."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from kazoo.client import KazooClient

from tests.helpers.poll import wait_until
from tierlog.cluster import paths
from tierlog.cluster.cluster_view import (
    BrokersChanged,
    ClusterView,
    ControllerChanged,
    PartitionChanged,
    TopicConfig,
    TopicConfigChanged,
    TopicDeleted,
    ViewChange,
)
from tierlog.cluster.election import elect_controller
from tierlog.cluster.fencing import FencedWriter
from tierlog.cluster.registration import register_broker
from tierlog.cluster.settings import ClusterSettings
from tierlog.cluster.topic_creation import create_topic
from tierlog.cluster.znodes import BrokerRegistration, PartitionState, TopicConfigOverrides
from tierlog.cluster.zookeeper import ZooKeeperClient
from tierlog.config import Endpoint

C = TypeVar("C")


class Changes:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[ViewChange] = []

    def __call__(self, change: ViewChange) -> None:
        with self.lock:
            self.seen.append(change)

    def of(self, kind: type[C]) -> list[C]:
        with self.lock:
            return [c for c in self.seen if isinstance(c, kind)]


def state_of(v: ClusterView, topic: str, index: int) -> PartitionState | None:
    info = v.partition(topic, index)
    return None if info is None else info.state


def epoch_of(v: ClusterView, topic: str, index: int) -> int:
    info = v.partition(topic, index)
    assert info is not None
    return info.partition_epoch


@pytest.fixture
def zk(cluster_settings: Callable[..., ClusterSettings]) -> Iterator[ZooKeeperClient]:
    settings = cluster_settings(0)
    client = ZooKeeperClient(settings.zookeeper, 2000, 15000)
    client.start()
    yield client
    client.close()


@pytest.fixture
def view(zk: ZooKeeperClient) -> Iterator[tuple[ClusterView, Changes]]:
    changes = Changes()
    v = ClusterView(zk.kazoo, changes)
    v.start()
    yield v, changes
    v.close()


def test_brokers_and_controller(view: tuple[ClusterView, Changes], zk: ZooKeeperClient) -> None:
    v, changes = view
    assert v.brokers() == {} and v.controller_id is None
    reg = BrokerRegistration(3, (Endpoint("PLAINTEXT", "h3", 9093),), rack="r1")
    registered = register_broker(zk.kazoo, reg)
    wait_until(lambda: 3 in v.brokers(), 10, what="broker 3 in the view")
    assert v.brokers()[3].registration == reg
    assert v.brokers()[3].broker_epoch == registered.broker_epoch
    assert elect_controller(zk.kazoo, 3, 0) is not None
    wait_until(lambda: v.controller_id == 3, 10, what="controller in the view")
    zk.kazoo.delete(paths.broker(3))
    zk.kazoo.delete(paths.CONTROLLER)
    wait_until(lambda: v.brokers() == {} and v.controller_id is None, 10, what="both gone")
    assert changes.of(BrokersChanged)[-1].brokers == {}
    assert [c.controller_id for c in changes.of(ControllerChanged)] == [3, None]


def test_partition_states_apply_by_epoch(
    view: tuple[ClusterView, Changes], zk: ZooKeeperClient, kazoo_client: KazooClient
) -> None:
    v, changes = view
    lease = elect_controller(zk.kazoo, 1, 0)
    assert lease is not None
    writer = FencedWriter(zk.kazoo, lease)
    create_topic(writer, "t", "AAAAAAAAAAAAAAAAAAAAAA", {0: [1, 2], 1: [2, 1]}, {}, {1, 2})
    wait_until(lambda: len(v.partitions("t")) == 2, 10, what="topic in the view")
    wait_until(
        lambda: all(p.state is not None for p in v.partitions("t").values()), 10, what="states"
    )
    p0 = v.partition("t", 0)
    assert p0 is not None and p0.replicas == (1, 2)
    assert p0.state == PartitionState(1, 0, (1, 2), lease.epoch) and p0.partition_epoch == 0

    state_path = paths.partition_state("t", 0)
    writer.set_data(state_path, PartitionState(2, 1, (2,), lease.epoch).encode(), version=0)
    wait_until(
        lambda: state_of(v, "t", 0) == PartitionState(2, 1, (2,), lease.epoch), 10, what="leader 2"
    )

    # A leader's ISR change keeps the leader epoch and moves the partition epoch: applied.
    kazoo_client.set(state_path, PartitionState(2, 1, (2, 1), lease.epoch).encode())
    expanded = PartitionState(2, 1, (2, 1), lease.epoch)
    wait_until(lambda: state_of(v, "t", 0) == expanded, 10, what="ISR expands")
    assert epoch_of(v, "t", 0) == 2

    # A state with a lower leader epoch (a stale writer) never moves the view back.
    kazoo_client.set(state_path, PartitionState(1, 0, (1,), lease.epoch).encode())
    kazoo_client.set(paths.partition_state("t", 1), PartitionState(1, 1, (1,), 9).encode())
    later = PartitionState(1, 1, (1,), 9)
    wait_until(lambda: state_of(v, "t", 1) == later, 10, what="later write seen")
    assert state_of(v, "t", 0) == expanded
    epochs = [
        c.info.state.leader_epoch
        for c in changes.of(PartitionChanged)
        if c.info.partition == 0 and c.info.state is not None
    ]
    assert epochs == sorted(epochs), "a partition's leader epoch never goes back"


def test_topic_deletion_and_recreation(
    view: tuple[ClusterView, Changes], zk: ZooKeeperClient, kazoo_client: KazooClient
) -> None:
    v, changes = view
    lease = elect_controller(zk.kazoo, 1, 0)
    assert lease is not None
    writer = FencedWriter(zk.kazoo, lease)
    create_topic(writer, "t", "AAAAAAAAAAAAAAAAAAAAAA", {0: [1]}, {}, {1})
    wait_until(lambda: v.partition("t", 0) is not None, 10, what="topic")
    writer.set_data(paths.partition_state("t", 0), PartitionState(1, 5, (1,), lease.epoch).encode())
    at_5 = PartitionState(1, 5, (1,), lease.epoch)
    wait_until(lambda: state_of(v, "t", 0) == at_5, 10, what="epoch 5")

    kazoo_client.delete(paths.topic("t"), recursive=True)
    kazoo_client.delete(paths.topic_config("t"))
    wait_until(lambda: "t" not in v.topics(), 10, what="topic deleted")
    assert [c.topic for c in changes.of(TopicDeleted)] == ["t"]

    create_topic(writer, "t", "BBBBBBBBBBBBBBBBBBBBBB", {0: [1]}, {}, {1})
    first = PartitionState(1, 0, (1,), lease.epoch)
    wait_until(lambda: state_of(v, "t", 0) == first, 10, what="re-created topic, first state")
    assert v.topics()["t"].topic_id == "BBBBBBBBBBBBBBBBBBBBBB"
    assert epoch_of(v, "t", 0) == 0


def test_a_topic_config_is_in_the_view_before_its_partitions_and_follows_writes(
    view: tuple[ClusterView, Changes], zk: ZooKeeperClient, kazoo_client: KazooClient
) -> None:
    v, changes = view
    seen_with_config: list[bool] = []

    def on_change(change: ViewChange) -> None:
        if isinstance(change, PartitionChanged) and change.info.topic == "c":
            seen_with_config.append(v.topic_config("c") is not None)

    v.add_listener(on_change)
    lease = elect_controller(zk.kazoo, 1, 0)
    assert lease is not None
    tid = "AAAAAAAAAAAAAAAAAAAAAQ"
    create_topic(FencedWriter(zk.kazoo, lease), "c", tid, {0: [1]}, {"retention.ms": "5"}, {1})
    wait_until(lambda: v.partition("c", 0) is not None, 10, what="topic in the view")
    assert seen_with_config and all(seen_with_config)
    assert v.topic_config("c") == TopicConfig({"retention.ms": "5"}, 0, tid)

    kazoo_client.set(paths.topic_config("c"), TopicConfigOverrides({"retention.ms": "6"}).encode())
    wait_until(
        lambda: v.topic_config("c") == TopicConfig({"retention.ms": "6"}, 1, tid),
        10,
        what="the write followed",
    )
    assert [ch.topic for ch in changes.of(TopicConfigChanged)] == ["c", "c"]
