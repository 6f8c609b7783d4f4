"""CreatePartitions in cluster mode (Kafka's ``addPartitions``): the grown assignment and the
new partitions' states written by the controller, every broker serving them, and each
broker holding local logs only for the partitions it hosts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidPartitionsError
from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster.partition_creation import grown_assignment
from tierlog.cluster.znodes import TopicAssignment
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode, KafkaError

BROKERS = {1: None, 2: None, 3: None}


def _grown(
    record: TopicAssignment, count: int, requested: Sequence[Sequence[int]] | None = None
) -> dict[int, tuple[int, ...]]:
    return grown_assignment(record, "t", count, requested, BROKERS)


def _refused(record: TopicAssignment, count: int, requested: Any = None) -> tuple[int, str]:
    with pytest.raises(KafkaError) as e:
        _grown(record, count, requested)
    return e.value.code, e.value.message or ""


def test_new_partitions_continue_the_round_robin_from_partition_zeros_leader() -> None:
    """Kafka starts the added partitions at the broker leading partition 0 and at the
    next partition id, so a topic grown later is spread as if created that size."""
    record = TopicAssignment({0: (2, 3), 1: (3, 1)})
    added = _grown(record, 5)
    assert sorted(added) == [2, 3, 4]
    assert all(len(set(r)) == 2 and set(r) <= set(BROKERS) for r in added.values())
    assert [r[0] for _, r in sorted(added.items())] == [1, 2, 3]


def test_explicit_assignments_are_checked_as_kafka_checks_them() -> None:
    record = TopicAssignment({0: (1, 2)})
    assert _grown(record, 3, [[3, 1], [2, 3]]) == {1: (3, 1), 2: (2, 3)}
    code, msg = _refused(record, 3, [[3, 1]])
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "by 2 but 1 assignments" in msg
    code, msg = _refused(record, 2, [[3, 3]])
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "Duplicate brokers" in msg
    code, msg = _refused(record, 2, [[3]])
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "Inconsistent replication" in msg
    code, msg = _refused(record, 2, [[3, 9]])
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "Unknown broker(s)" in msg


def test_counts_that_do_not_grow_and_topics_being_reassigned_are_refused() -> None:
    record = TopicAssignment({0: (1,), 1: (2,)})
    code, msg = _refused(record, 1)
    assert code == ErrorCode.INVALID_PARTITIONS and "higher than the requested 1" in msg
    code, msg = _refused(record, 2)
    assert code == ErrorCode.INVALID_PARTITIONS and "already has 2 partitions" in msg
    moving = TopicAssignment({0: (3, 1), 1: (2,)}, adding={0: (3,)}, removing={0: (1,)})
    assert _refused(moving, 3)[0] == ErrorCode.REASSIGNMENT_IN_PROGRESS
    code, msg = _refused(TopicAssignment({0: (1, 2, 3, 4)}), 2)
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR and "larger than available" in msg


def _partition_dirs(broker: BrokerProcess, topic: str) -> set[int]:
    return {
        int(d.name.rsplit("-", 1)[1])
        for d in broker.log_dir.glob(f"{topic}-*")
        if d.is_dir() and d.name.rsplit("-", 1)[1].isdigit()
    }


def _hosts_only_its_replicas(
    brokers: Mapping[int, BrokerProcess], kazoo: KazooClient, topic: str
) -> bool:
    a = c.assignment(kazoo, topic)
    assert a is not None
    return all(
        _partition_dirs(b, topic) == {p for p, rs in a.partitions.items() if i in rs}
        for i, b in brokers.items()
    )


def _full_isr(kazoo: KazooClient, topic: str, p: int, replicas: Sequence[int]) -> bool:
    s = c.state(kazoo, topic, p)
    return s is not None and set(s.isr) == set(replicas)


def _create_partitions(bootstrap: str, **fields: Any) -> tuple[int, str | None]:
    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(ApiKey.CREATE_PARTITIONS, 3, timeout=15000, **fields)
    return int(r.results[0].error_code), r.results[0].error_message


def test_create_partitions_grows_a_replicated_topic_that_every_broker_serves(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """confluent-kafka's AdminClient grows a 2-partition RF=2 topic to 4 through the
    controller: the new partitions get replicas, leaders and full ISRs, records produced to
    them read back, each broker holds logs only for the partitions it hosts (one that hosts
    none answers NOT_LEADER_OR_FOLLOWER for it), and ``tierlog topics alter`` sent to any
    broker grows it again."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client)
    c.create_topic(brokers, kazoo_client, "grow", [[1, 2], [2, 3]])
    hosts_only_its_replicas = partial(_hosts_only_its_replicas, brokers, kazoo_client, "grow")
    wait_until(hosts_only_its_replicas, 20, what="logs for the hosted partitions only")
    bootstrap = c.bootstrap(brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions("grow", 4)])["grow"].result(timeout=30)
    a = c.assignment(kazoo_client, "grow")
    assert a is not None and sorted(a.partitions) == [0, 1, 2, 3]
    for p in (2, 3):
        assert len(set(a.partitions[p])) == 2
        wait_until(
            partial(_full_isr, kazoo_client, "grow", p, a.partitions[p]),
            20,
            what=f"grow-{p} with a full ISR",
        )
    values = [b"g%02d" % i for i in range(20)]
    c.produce(bootstrap, "grow", values, partition=3)
    assert c.consume(bootstrap, "grow", 3, len(values)) == values
    wait_until(hosts_only_its_replicas, 20, what="logs for the new hosted partitions only")
    outsider = next(i for i in brokers if i not in a.partitions[3])
    with WireConnection.to_bootstrap(brokers[outsider].bootstrap) as conn:
        r = conn.call(
            ApiKey.LIST_OFFSETS,
            7,
            replica_id=-1,
            isolation_level=0,
            topics=[{"name": "grow", "partitions": [{"partition_index": 3, "timestamp": -1}]}],
        )
    assert r.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    not_controller = next(i for i in brokers if i != c.controller_of(kazoo_client))
    out = c.run_cli(
        "topics",
        "alter",
        "--bootstrap-server",
        brokers[not_controller].bootstrap,
        "--topic",
        "grow",
        "--partitions",
        "5",
    )
    assert out.returncode == 0, out.stderr
    assert "Increased the partition count of grow to 5." in out.stdout
    grown = c.assignment(kazoo_client, "grow")
    assert grown is not None and sorted(grown.partitions) == [0, 1, 2, 3, 4]
    c.produce(bootstrap, "grow", [b"five"], partition=4)
    assert c.consume(bootstrap, "grow", 4, 1) == [b"five"]


def test_create_partitions_refusals_on_a_cluster(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """NOT_CONTROLLER off the controller; INVALID_PARTITIONS for a count that does not
    grow; INVALID_REPLICA_ASSIGNMENT for an unknown broker; UNKNOWN_TOPIC_OR_PARTITION for
    a topic that does not exist; validate_only writes nothing. kafka-python's admin client,
    which finds the controller itself, then grows the topic with an explicit assignment."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, n=2)
    c.create_topic(brokers, kazoo_client, "fixed", [[1, 2]])
    controller = brokers[c.controller_of(kazoo_client)]
    other = next(b for b in brokers.values() if b is not controller)

    def ask(broker: BrokerProcess, name: str, count: int, **kw: Any) -> tuple[int, str | None]:
        topic = {"name": name, "count": count, "assignments": kw.pop("assignments", None)}
        return _create_partitions(
            broker.bootstrap, topics=[topic], validate_only=kw.pop("validate_only", False)
        )

    assert ask(other, "fixed", 2)[0] == ErrorCode.NOT_CONTROLLER
    assert ask(controller, "fixed", 0)[0] == ErrorCode.INVALID_PARTITIONS
    assert ask(controller, "fixed", 1)[0] == ErrorCode.INVALID_PARTITIONS
    code, msg = ask(controller, "fixed", 2, assignments=[{"broker_ids": [1, 9]}])
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "9" in (msg or "")
    assert ask(controller, "absent", 2)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask(controller, "fixed", 3, validate_only=True)[0] == ErrorCode.NONE
    a = c.assignment(kazoo_client, "fixed")
    assert a is not None and sorted(a.partitions) == [0]
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": c.bootstrap(brokers), "group.id": "g"}
    )
    try:
        md = consumer.list_topics("fixed", timeout=10)
        assert sorted(md.topics["fixed"].partitions) == [0]
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=other.bootstrap)
    try:
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"fixed": 1})
        admin.create_partitions({"fixed": {"count": 2, "assignments": [[2, 1]]}})
    finally:
        admin.close()
    a = c.assignment(kazoo_client, "fixed")
    assert a is not None and a.partitions == {0: (1, 2), 1: (2, 1)}


def test_partitions_added_while_producing_lose_and_duplicate_nothing(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """An idempotent keyed producer keeps sending while the topic grows from 2 to 4
    partitions. Every send and its outcome are recorded, then every partition read back
    (Jepsen's checks): each acknowledged value is read exactly once, at the partition and
    offset it was acknowledged with, each partition holding its sends in the order they
    were made; keys reach the new partitions once the producer's metadata shows them."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client)
    c.create_topic(brokers, kazoo_client, "load", [[1, 2], [2, 3]])
    bootstrap = c.bootstrap(brokers)
    acked: dict[bytes, tuple[int, int]] = {}
    failed: dict[bytes, str] = {}

    def done(err: Any, msg: confluent_kafka.Message) -> None:
        value = msg.value()
        assert value is not None
        if err is None:
            acked[value] = (int(msg.partition() or 0), int(msg.offset() or 0))
        else:
            failed[value] = str(err)

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce("load", b"v%05d" % i, key=b"k%d" % i, on_delivery=done)
            producer.poll(0)

    send(0, 400)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    grown = admin.create_partitions([NewPartitions("load", 4)])["load"]
    send(400, 400)
    grown.result(timeout=30)
    wait_until(
        lambda: _sent_to_new_partitions(producer, send, acked),
        60,
        what="keys sent to the new partitions",
    )
    assert producer.flush(60) == 0 and not failed, list(failed.items())[:3]
    read = [(v, (p, o)) for p, o, v in c.read_records(bootstrap, "load", range(4), len(acked))]
    values = [v for v, _ in read]
    assert len(values) == len(set(values)), "no value twice"
    assert sorted(values) == sorted(acked), "every acknowledged value, nothing else"
    assert all(acked[v] == at for v, at in read), "read where it was acknowledged"
    for p in range(4):
        sent_order = [int(v[1:]) for v, (q, _) in read if q == p]
        assert sent_order == sorted(sent_order), f"partition {p} holds its sends in order"


def _sent_to_new_partitions(
    producer: confluent_kafka.Producer,
    send: Callable[[int, int], None],
    acked: Mapping[bytes, tuple[int, int]],
) -> bool:
    """Whether acknowledged values reached partitions 2 and 3; else 100 more are sent."""
    producer.flush(30)
    if {p for p, _ in acked.values()} >= {2, 3}:
        return True
    send(1000 + len(acked), 100)
    return False
