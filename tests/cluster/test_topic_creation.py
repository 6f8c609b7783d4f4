"""The controller's writes for a new topic, against a real ZooKeeper (Z-13)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from tierlog.cluster import paths
from tierlog.cluster.assignment import assign_replicas
from tierlog.cluster.election import elect_controller
from tierlog.cluster.fencing import ControllerMovedError, FencedWriter
from tierlog.cluster.settings import ClusterSettings
from tierlog.cluster.topic_creation import TopicExistsError, create_topic
from tierlog.cluster.znodes import PartitionState, TopicAssignment, TopicConfigOverrides
from tierlog.cluster.zookeeper import ZooKeeperClient

TOPIC_ID = "Fg9wOTGxQ3GPtL9sZ6kQ7w"


@pytest.fixture
def zk_pair(
    cluster_settings: Callable[..., ClusterSettings],
) -> Iterator[tuple[ZooKeeperClient, ZooKeeperClient]]:
    settings = cluster_settings(0)
    pair = (
        ZooKeeperClient(settings.zookeeper, 2000, 15000),
        ZooKeeperClient(settings.zookeeper, 2000, 15000),
    )
    for c in pair:
        c.start()
    yield pair
    for c in pair:
        c.close()


def test_create_topic_writes_config_assignment_and_states(
    zk_pair: tuple[ZooKeeperClient, ZooKeeperClient], kazoo_client: KazooClient
) -> None:
    zk, _ = zk_pair
    lease = elect_controller(zk.kazoo, 1, 0)
    assert lease is not None
    assignment = assign_replicas({1: None, 2: None, 3: None}, 3, 2, fixed_start_index=0)
    states = create_topic(
        FencedWriter(zk.kazoo, lease), "t", TOPIC_ID, assignment, {"retention.ms": "1000"}, {1, 2}
    )
    assert assignment == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert states == {
        0: PartitionState(1, 0, (1, 2), lease.epoch),
        1: PartitionState(2, 0, (2,), lease.epoch),
        2: PartitionState(1, 0, (1,), lease.epoch),
    }
    stored = TopicAssignment.decode(kazoo_client.get(paths.topic("t"))[0])
    assert stored.partitions == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert stored.topic_id == TOPIC_ID
    config = json.loads(kazoo_client.get(paths.topic_config("t"))[0])
    assert config == {"version": 1, "config": {"retention.ms": "1000"}}
    assert TopicConfigOverrides.decode(kazoo_client.get(paths.topic_config("t"))[0]).config == {
        "retention.ms": "1000"
    }
    for p, state in states.items():
        data, stat = kazoo_client.get(paths.partition_state("t", p))
        assert PartitionState.decode(data) == state
        assert stat.version == 0, "partition epoch 0"
    with pytest.raises(TopicExistsError):
        create_topic(FencedWriter(zk.kazoo, lease), "t", TOPIC_ID, assignment, {}, {1, 2})


def test_a_partition_without_live_replicas_gets_no_state(
    zk_pair: tuple[ZooKeeperClient, ZooKeeperClient], kazoo_client: KazooClient
) -> None:
    zk, _ = zk_pair
    lease = elect_controller(zk.kazoo, 1, 0)
    assert lease is not None
    states = create_topic(FencedWriter(zk.kazoo, lease), "t", TOPIC_ID, {0: [5], 1: [1]}, {}, {1})
    assert states[0] is None
    assert kazoo_client.exists(paths.partition_state("t", 0)) is None
    assert kazoo_client.exists(paths.partition_state("t", 1)) is not None


def test_a_deposed_controller_creates_nothing(
    zk_pair: tuple[ZooKeeperClient, ZooKeeperClient], kazoo_client: KazooClient
) -> None:
    a, b = zk_pair
    old = elect_controller(a.kazoo, 1, 0)
    assert old is not None
    a.kazoo.delete(paths.CONTROLLER)
    assert elect_controller(b.kazoo, 2, 0) is not None
    with pytest.raises(ControllerMovedError):
        create_topic(FencedWriter(a.kazoo, old), "t", TOPIC_ID, {0: [1]}, {}, {1})
    assert kazoo_client.exists(paths.topic("t")) is None
    assert kazoo_client.exists(paths.topic_config("t")) is None
