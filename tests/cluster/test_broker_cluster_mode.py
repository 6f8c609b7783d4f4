"""Real ``tierlog serve`` processes with ``zookeeper.connect``: each registers under
/brokers/ids with the address it serves, exactly one is controller, and the controller role
moves when that broker stops (SIGTERM: at once) or crashes (kill -9: after its session)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from functools import partial

from kazoo.client import KazooClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.election import read_controller, read_controller_epoch
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState, TopicAssignment
from tierlog.config import load_broker_config
from tierlog.protocol.api_keys import ApiKey
from tierlog.server.cluster_mode import ClusterMode

SESSION_TIMEOUT_MS = 2000


def _cluster_broker(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, node_id: int
) -> BrokerProcess:
    return broker_factory(
        overrides={
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "broker.id": str(node_id),
            "broker.rack": f"rack{node_id % 2}",
            "remote.log.storage.system.enable": "false",
        }
    )


def test_two_brokers_register_and_elect_one_controller(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    b1 = _cluster_broker(broker_factory, zk_connect, 1)
    b2 = _cluster_broker(broker_factory, zk_connect, 2)
    brokers = live_brokers(kazoo_client)
    assert sorted(brokers) == [1, 2]
    for b, node_id in ((b1, 1), (b2, 2)):
        host, port = b.host_port
        reg = brokers[node_id]
        assert [(e.listener, e.host, e.port) for e in reg.endpoints] == [("PLAINTEXT", host, port)]
        assert reg.rack == f"rack{node_id % 2}"
        assert json.loads(kazoo_client.get(paths.broker(node_id))[0])["version"] == 5
    assert read_controller(kazoo_client) == 1
    first_epoch = read_controller_epoch(kazoo_client)[0]

    assert b1.stop() == 0
    assert kazoo_client.exists(paths.broker(1)) is None, "a clean stop deregisters at once"
    wait_until(lambda: read_controller(kazoo_client) == 2, 10, what="broker 2 takes over")
    assert read_controller_epoch(kazoo_client)[0] == first_epoch + 1

    b1.start()
    wait_until(lambda: sorted(live_brokers(kazoo_client)) == [1, 2], 10, what="1 is back")
    b2.kill()
    killed_at = time.monotonic()
    wait_until(lambda: read_controller(kazoo_client) == 1, 15, what="failover after kill -9")
    assert time.monotonic() - killed_at < SESSION_TIMEOUT_MS / 1000 + 5
    assert read_controller_epoch(kazoo_client)[0] == first_epoch + 2
    assert sorted(live_brokers(kazoo_client)) == [1]


def test_controller_moves_leadership_off_a_killed_broker(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """A topic written as Kafka's old admin tools did (the assignment znode alone) gets its
    states from the controller; kill -9 of the controller, which also leads a partition,
    moves the controller and that leadership once its session expires."""
    b1 = _cluster_broker(broker_factory, zk_connect, 1)
    _cluster_broker(broker_factory, zk_connect, 2)
    assert read_controller(kazoo_client) == 1
    kazoo_client.create(paths.topic("t"), TopicAssignment({0: (1, 2), 1: (2, 1)}).encode())

    def state(p: int) -> PartitionState | None:
        path = paths.partition_state("t", p)
        return (
            PartitionState.decode(kazoo_client.get(path)[0]) if kazoo_client.exists(path) else None
        )

    epoch = read_controller_epoch(kazoo_client)[0]
    wait_until(lambda: state(0) == PartitionState(1, 0, (1, 2), epoch), 10, what="t-0 state")
    wait_until(lambda: state(1) == PartitionState(2, 0, (2, 1), epoch), 10, what="t-1 state")

    b1.kill()
    wait_until(lambda: read_controller(kazoo_client) == 2, 15, what="broker 2 is controller")
    wait_until(lambda: state(0) == PartitionState(2, 1, (2,), epoch + 1), 10, what="t-0 on 2")
    wait_until(lambda: state(1) == PartitionState(2, 1, (2,), epoch + 1), 10, what="t-1 ISR")

    b1.start()
    wait_until(lambda: sorted(live_brokers(kazoo_client)) == [1, 2], 10, what="1 is back")


def test_a_broker_restarted_right_after_kill_9_rejoins(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """Its previous session's registration is still there when it starts again: it waits
    for that session to expire and registers with a new broker epoch."""
    b1 = _cluster_broker(broker_factory, zk_connect, 1)
    old_epoch = kazoo_client.get(paths.broker(1))[1].czxid
    b1.kill()
    b1.start(timeout_s=SESSION_TIMEOUT_MS / 1000 + 30)
    data, stat = kazoo_client.get(paths.broker(1))
    assert stat.czxid > old_epoch
    assert json.loads(data)["endpoints"] == [f"PLAINTEXT://{b1.bootstrap}"]


def test_single_node_mode_has_no_cluster_hook() -> None:
    """Without zookeeper.connect the broker's hook is absent: no ZooKeeper is contacted."""
    assert asyncio.run(ClusterMode.start(load_broker_config({}), ("127.0.0.1", 9092))) is None


def _topic_answer(bootstrap: str, topic: str) -> tuple[int, list[int]] | None:
    """The topic's error code and partition indexes in ``bootstrap``'s Metadata answer;
    None if the broker is not accepting connections."""
    try:
        with WireConnection.to_bootstrap(bootstrap, timeout_s=30) as conn:
            r = conn.call(
                ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False
            )
    except OSError:
        return None
    (t,) = r.topics
    return int(t.error_code), sorted(int(p.partition_index) for p in t.partitions)


def test_a_restarting_broker_answers_metadata_only_once_it_has_read_the_cluster(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """A client that reaches a broker while it restarts is answered only once the broker has
    joined its cluster, so every Metadata answer lists the topic with its partitions. One
    answered before the join named the topic unknown with no partitions, and an idempotent
    librdkafka producer took that for a partition count of 0 and stopped producing."""
    b1 = _cluster_broker(broker_factory, zk_connect, 1)
    _cluster_broker(broker_factory, zk_connect, 2)
    kazoo_client.create(paths.topic("t"), TopicAssignment({0: (1, 2), 1: (2, 1)}).encode())
    wait_until(lambda: _topic_answer(b1.bootstrap, "t") == (0, [0, 1]), 20, what="t in Metadata")
    assert b1.stop() == 0

    answers: list[tuple[int, list[int]]] = []
    done = threading.Event()

    def ask_while_it_starts() -> None:
        while not done.is_set():  # each answer as soon as the broker accepts a connection
            answers.append(
                wait_until(
                    partial(_topic_answer, b1.bootstrap, "t"), 30, 0.005, what="b1 listening"
                )
            )

    asker = threading.Thread(target=ask_while_it_starts, daemon=True)
    asker.start()
    try:
        b1.start()
        wait_until(lambda: len(answers) >= 20, 30, what="answers after the restart")
    finally:
        done.set()
        asker.join(30)
    assert answers and all(a == (0, [0, 1]) for a in answers), answers[:5]
