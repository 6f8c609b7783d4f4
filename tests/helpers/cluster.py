"""Real ``tierlog serve`` brokers on a real ZooKeeper, for the controller's admin tests.

* ``start_cluster(broker_factory, zk_connect, kazoo, n, extra)``: ``n`` brokers (ids 1..n)
  with short timeouts, returned once all are registered and each lists all in Metadata.
* ``create_topic(brokers, name, assignment=..., config=...)``: CreateTopics on the controller
  with an explicit replica assignment, waiting until every partition has a leader.
* ``state(kazoo, topic, p)``, ``state_when(kazoo, topic, holds)``,
  ``assignment(kazoo, topic)``: what ZooKeeper holds.
* ``produce(bootstrap, topic, values, acks)`` / ``consume(bootstrap, topic, p, n)``, and
  ``read_records(bootstrap, topic, partitions, n)`` with each record's partition and offset.
* ``run_cli(*args)``: ``python -m tierlog ...`` as an operator runs it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

import confluent_kafka
from kazoo.client import KazooClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState, TopicAssignment
from tierlog.protocol.api_keys import ApiKey

SESSION_TIMEOUT_MS = 2000


def start_cluster(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo: KazooClient,
    n: int = 3,
    extra: Mapping[str, str] | None = None,
) -> dict[int, BrokerProcess]:
    brokers = {
        i: broker_factory(
            overrides={
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "broker.id": str(i),
                "remote.log.storage.system.enable": "false",
                "replica.lag.time.max.ms": "4000",
                "replica.fetch.wait.max.ms": "200",
                "replica.fetch.backoff.ms": "100",
                **(extra or {}),
            }
        )
        for i in range(1, n + 1)
    }
    wait_until(lambda: sorted(live_brokers(kazoo)) == list(brokers), 20, what="all registered")
    # each broker learns of the others through a ZooKeeper watch, a moment after they
    # registered: a CreateTopics it answers before then sees fewer brokers than there are
    for b in brokers.values():
        wait_until(partial(knows_all, b, set(brokers)), 20, what=f"all known to {b.bootstrap}")
    return brokers


def knows_all(broker: BrokerProcess, ids: set[int]) -> bool:
    return metadata_brokers(broker) == ids


def metadata_brokers(broker: BrokerProcess) -> set[int]:
    """The broker ids ``broker`` lists in its Metadata response (what clients see)."""
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        r = conn.call(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False)
    return {int(b.node_id) for b in r.brokers}


def bootstrap(brokers: Mapping[int, BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers.values() if b.running)


def state(kazoo: KazooClient, topic: str, p: int = 0) -> PartitionState | None:
    path = paths.partition_state(topic, p)
    if kazoo.exists(path) is None:
        return None
    return PartitionState.decode(kazoo.get(path)[0])


def state_when(
    kazoo: KazooClient, topic: str, holds: Callable[[PartitionState], bool], p: int = 0
) -> PartitionState | None:
    """The partition's state once ``holds`` is true of it (for ``wait_until``)."""
    s = state(kazoo, topic, p)
    return s if s is not None and holds(s) else None


def assignment(kazoo: KazooClient, topic: str) -> TopicAssignment | None:
    if kazoo.exists(paths.topic(topic)) is None:
        return None
    return TopicAssignment.decode(kazoo.get(paths.topic(topic))[0])


def controller_of(kazoo: KazooClient) -> int:
    from tierlog.cluster.election import read_controller

    return wait_until(lambda: read_controller(kazoo), 20, what="a controller")


def create_topic(
    brokers: Mapping[int, BrokerProcess],
    kazoo: KazooClient,
    name: str,
    replicas: Sequence[Sequence[int]],
    config: Mapping[str, str] | None = None,
) -> None:
    """CreateTopics on the controller with ``replicas[p]`` as partition ``p``'s assignment
    (asked again while the controller's view has not yet seen every broker register)."""
    code, message = wait_until(
        partial(_create_once, brokers, kazoo, name, replicas, config or {}),
        20,
        what=f"{name} created",
    )
    assert code == 0, message
    for p, rs in enumerate(replicas):
        wait_until(
            partial(_online, kazoo, name, p, sorted(rs)), 20, what=f"{name}-{p} with a full ISR"
        )


def _create_once(
    brokers: Mapping[int, BrokerProcess],
    kazoo: KazooClient,
    name: str,
    replicas: Sequence[Sequence[int]],
    config: Mapping[str, str],
) -> tuple[int, str | None] | None:
    """CreateTopics' answer, or None when the controller moved or has not seen a broker."""
    controller = brokers[controller_of(kazoo)]
    with WireConnection.to_bootstrap(controller.bootstrap) as conn:
        r = conn.call(
            ApiKey.CREATE_TOPICS,
            5,
            topics=[
                {
                    "name": name,
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(rs)}
                        for p, rs in enumerate(replicas)
                    ],
                    "configs": [{"name": k, "value": v} for k, v in config.items()],
                }
            ],
            timeout=15000,
            validate_only=False,
        )
    code = int(r.topics[0].error_code)
    return None if code in (39, 41) else (code, r.topics[0].error_message)


def _online(kazoo: KazooClient, topic: str, p: int, isr: list[int]) -> bool:
    s = state(kazoo, topic, p)
    return s is not None and sorted(s.isr) == isr


def produce(bootstrap: str, topic: str, values: Sequence[bytes], partition: int = 0) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True}
    )
    failed: list[str] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for v in values:
        producer.produce(topic, v, partition=partition, on_delivery=done)
    assert producer.flush(60) == 0 and not failed, failed[:3]


def read_records(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    expected: int,
    timeout_s: float = 60,
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of the records of ``partitions`` read from offset 0 by a
    consumer of its own, in the order polled, until ``expected`` were read or ``timeout_s``
    passed: the caller checks what it got."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            partition, offset, value = msg.partition(), msg.offset(), msg.value()
            assert partition is not None and offset is not None and value is not None
            got.append((partition, offset, value))
    finally:
        consumer.close()
    return got


def consume(
    bootstrap: str, topic: str, partition: int, expected: int, timeout_s: float = 60
) -> list[bytes]:
    return [v for _, _, v in read_records(bootstrap, topic, [partition], expected, timeout_s)]


def coordinator_of(bootstrap: str, key: str, key_type: int) -> int | None:
    """The node id FindCoordinator names for a group (``key_type`` 0) or a transactional
    id (1); None while the internal topic behind it is not ready."""
    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(ApiKey.FIND_COORDINATOR, 3, key=key, key_type=key_type)
    return int(r.node_id) if int(r.error_code) == 0 else None


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tierlog", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=check,
    )
