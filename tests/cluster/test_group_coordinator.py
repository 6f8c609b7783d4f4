"""The group coordinator in a three-broker cluster (issue 13, "internal topics are
replicated"; Kafka's ``GroupCoordinator`` placement): ``__consumer_offsets`` is created
through ZooKeeper with ``offsets.topic.replication.factor``, the coordinator of a group is
the leader of its partition, FindCoordinator follows that leadership, and a group resumes
from its committed offsets after ``kill -9`` of its coordinator, with real clients."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.helpers import cluster as cluster_helpers
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState, TopicAssignment, TopicConfigOverrides
from tierlog.protocol.api_keys import ApiKey
from tierlog.server.group.schema import OFFSETS_TOPIC, partition_for

SESSION_TIMEOUT_MS = 2000
OFFSETS_PARTITIONS = 3
TOPIC = "orders"
PARTITIONS = 3
RECORDS = 600


def start_cluster(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo: KazooClient,
    extra: dict[str, str] | None = None,
) -> dict[int, BrokerProcess]:
    """Three brokers with a small ``__consumer_offsets`` (``OFFSETS_PARTITIONS``)."""
    offsets = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
    return cluster_helpers.start_cluster(
        broker_factory, zk_connect, kazoo, extra={**offsets, **(extra or {})}
    )


bootstrap = cluster_helpers.bootstrap


def offsets_state(kazoo: KazooClient, p: int) -> PartitionState | None:
    path = paths.partition_state(OFFSETS_TOPIC, p)
    if kazoo.exists(path) is None:
        return None
    return PartitionState.decode(kazoo.get(path)[0])


def full_isr(kazoo: KazooClient, p: int, brokers: int = 3) -> PartitionState | None:
    s = offsets_state(kazoo, p)
    return s if s is not None and len(s.isr) == brokers else None


def new_leader(kazoo: KazooClient, p: int, old: int) -> PartitionState | None:
    """The partition's state once a broker other than ``old`` leads it."""
    s = offsets_state(kazoo, p)
    return s if s is not None and s.leader not in (old, -1) else None


def find_coordinator(broker: BrokerProcess, group: str) -> tuple[int, int]:
    """FindCoordinator v3 over the wire: (error code, node id)."""
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        r = conn.call(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
    return int(r.error_code), int(r.node_id)


def offset_fetch_error(broker: BrokerProcess, group: str) -> int:
    """OffsetFetch v5 for the group at ``broker``: the group-level error code."""
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        r = conn.call(
            ApiKey.OFFSET_FETCH,
            5,
            group_id=group,
            topics=[{"name": TOPIC, "partition_indexes": [0]}],
        )
    return int(r.error_code)


def create_topic(brokers: dict[int, BrokerProcess]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    futures = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
        operation_timeout=15,
    )
    futures[TOPIC].result(30)


def produce(brokers: dict[int, BrokerProcess]) -> dict[int, list[bytes]]:
    """RECORDS values, acks=all, round robin over the partitions: values by partition in
    offset order (offset == index)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap(brokers), "acks": "all", "linger.ms": 5}
    )
    by_partition: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    acked: dict[bytes, tuple[int, int]] = {}

    def done(err: object, msg: confluent_kafka.Message) -> None:
        assert err is None, err
        value, p, o = msg.value(), msg.partition(), msg.offset()
        assert value is not None and p is not None and o is not None
        acked[value] = (p, o)

    for i in range(RECORDS):
        producer.produce(TOPIC, b"r%05d" % i, partition=i % PARTITIONS, on_delivery=done)
        producer.poll(0)
    assert producer.flush(60) == 0
    for value, (p, o) in sorted(acked.items(), key=lambda kv: kv[1]):
        assert o == len(by_partition[p])
        by_partition[p].append(value)
    return by_partition


def wait_offsets_topic(kazoo: KazooClient, group: str) -> int:
    p = partition_for(group, OFFSETS_PARTITIONS)
    wait_until(lambda: full_isr(kazoo, p), 30, what=f"{OFFSETS_TOPIC}-{p} with a full ISR")
    return p


@pytest.fixture
def cluster(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> Iterator[dict[int, BrokerProcess]]:
    brokers = start_cluster(broker_factory, zk_connect, kazoo_client)
    create_topic(brokers)
    yield brokers


def test_offsets_topic_is_created_replicated_and_compacted(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    wait_until(lambda: find_coordinator(cluster[2], "g")[0] == 0, 30, what="a coordinator")
    data, _ = kazoo_client.get(paths.topic(OFFSETS_TOPIC))
    assignment = TopicAssignment.decode(data)
    assert len(assignment.partitions) == OFFSETS_PARTITIONS
    assert all(len(r) == 3 for r in assignment.partitions.values())
    config = TopicConfigOverrides.decode(kazoo_client.get(paths.topic_config(OFFSETS_TOPIC))[0])
    assert config.config["cleanup.policy"] == "compact"
    md = AdminClient({"bootstrap.servers": bootstrap(cluster)}).list_topics(timeout=10)
    assert len(md.topics[OFFSETS_TOPIC].partitions) == OFFSETS_PARTITIONS


def test_find_coordinator_refuses_until_enough_brokers_for_the_offsets_topic(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """Kafka: with fewer live brokers than offsets.topic.replication.factor the topic is not
    created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE (15)."""
    lone = broker_factory(
        overrides={
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "broker.id": "1",
            "remote.log.storage.system.enable": "false",
        }
    )
    wait_until(lambda: sorted(live_brokers(kazoo_client)) == [1], 20, what="registered")
    assert find_coordinator(lone, "g") == (15, -1)
    assert kazoo_client.exists(paths.topic(OFFSETS_TOPIC)) is None


def test_find_coordinator_follows_the_offsets_partition_leader(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    group = "follow-me"
    find_coordinator(cluster[1], group)
    p = wait_offsets_topic(kazoo_client, group)
    before = offsets_state(kazoo_client, p)
    assert before is not None
    for b in cluster.values():
        wait_until(
            lambda b=b: find_coordinator(b, group) == (0, before.leader),  # type: ignore[misc]
            20,
            what=f"broker {b.overrides['broker.id']} answering {before.leader}",
        )
    leader = cluster[before.leader]
    wait_until(lambda: offset_fetch_error(leader, group) == 0, 20, what="the partition loaded")
    for i, b in cluster.items():
        if i != before.leader:
            assert offset_fetch_error(b, group) == 16, f"NOT_COORDINATOR at broker {i}"
    cluster[before.leader].kill()
    after = wait_until(
        lambda: new_leader(kazoo_client, p, before.leader),
        SESSION_TIMEOUT_MS / 1000 + 20,
        what="a new leader",
    )
    for i, b in cluster.items():
        if i == before.leader:
            continue
        wait_until(
            lambda b=b: find_coordinator(b, group) == (0, after.leader),  # type: ignore[misc]
            20,
            what=f"FindCoordinator at broker {i} answering the new leader {after.leader}",
        )


def check_resumed(
    produced: dict[int, list[bytes]],
    first_run: dict[int, list[int]],
    committed: dict[int, int],
    second_run: dict[int, list[int]],
) -> None:
    """What committed offsets promise: the second consumer starts each partition exactly at
    the committed offset, reads on without gaps to the end, and so every record is read at
    least once; a record is read twice only if it lies in the range the first consumer read
    but did not commit."""
    for p, values in produced.items():
        first, second = first_run.get(p, []), second_run.get(p, [])
        assert first == list(range(len(first))), f"partition {p}: first run has a gap"
        assert second == list(range(committed[p], len(values))), (
            f"partition {p}: the second run starts at the committed offset {committed[p]} "
            f"and reads to the end without a gap"
        )
        twice = set(first) & set(second)
        assert twice == set(range(committed[p], len(first))), f"partition {p}: duplicates"
        assert set(first) | set(second) == set(range(len(values))), f"partition {p}: lost"


def consume_confluent(
    bootstrap_servers: str,
    group: str,
    per_partition: Callable[[dict[int, list[int]]], bool],
    timeout_s: float = 60,
) -> tuple[confluent_kafka.Consumer, dict[int, list[int]]]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe([TOPIC])
    seen: dict[int, list[int]] = {}
    deadline = time.monotonic() + timeout_s
    while not per_partition(seen) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        p, o = msg.partition(), msg.offset()
        assert p is not None and o is not None
        seen.setdefault(p, []).append(o)
    assert per_partition(seen), f"consumed only { ({p: len(o) for p, o in seen.items()}) }"
    return consumer, seen


def test_confluent_group_resumes_from_committed_offsets_after_kill_9_of_its_coordinator(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    group = "resume-confluent"
    produced = produce(cluster)
    half = RECORDS // PARTITIONS // 2

    consumer, first = consume_confluent(
        bootstrap(cluster),
        group,
        lambda s: len(s) == PARTITIONS and all(len(o) >= half for o in s.values()),
    )
    committed = {p: offsets[-1] + 1 for p, offsets in first.items()}
    consumer.commit(
        offsets=[confluent_kafka.TopicPartition(TOPIC, p, o) for p, o in committed.items()],
        asynchronous=False,
    )
    for _ in range(20):  # read on without committing: the range a restart may read again
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            p, o = msg.partition(), msg.offset()
            assert p is not None and o is not None
            first[p].append(o)
    consumer.close()

    p = wait_offsets_topic(kazoo_client, group)
    coordinator = offsets_state(kazoo_client, p)
    assert coordinator is not None
    assert find_coordinator(cluster[coordinator.leader], group) == (0, coordinator.leader)
    cluster[coordinator.leader].kill()
    new = wait_until(
        lambda: new_leader(kazoo_client, p, coordinator.leader),
        SESSION_TIMEOUT_MS / 1000 + 20,
        what="a new coordinator",
    )

    sizes = {q: len(v) for q, v in produced.items()}
    consumer, second = consume_confluent(
        bootstrap(cluster),
        group,
        lambda s: all(s.get(q, [committed[q] - 1])[-1] == n - 1 for q, n in sizes.items()),
        timeout_s=90,
    )
    consumer.close()
    check_resumed(produced, first, committed, second)
    survivor = next(b for i, b in cluster.items() if i != coordinator.leader)
    assert find_coordinator(survivor, group) == (0, new.leader)


def test_kafka_python_group_commits_through_a_coordinator_kill_9_and_resumes(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """A kafka-python consumer stays up while its coordinator is killed: it finds the new
    coordinator, its later commits succeed, and a second consumer resumes from them."""
    group = "resume-kafka-python"
    produced = produce(cluster)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap(cluster),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        request_timeout_ms=15000,
    )
    consumer.subscribe([TOPIC])
    first: dict[int, list[int]] = {}
    third = RECORDS // PARTITIONS // 3

    def read_until(enough: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not enough() and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500, max_records=50).items():
                first.setdefault(tp.partition, []).extend(m.offset for m in msgs)
        assert enough(), {p: len(o) for p, o in first.items()}

    read_until(
        lambda: len(first) == PARTITIONS and all(len(o) >= third for o in first.values()), 60
    )
    consumer.commit()

    p = wait_offsets_topic(kazoo_client, group)
    coordinator = offsets_state(kazoo_client, p)
    assert coordinator is not None
    cluster[coordinator.leader].kill()
    wait_until(
        lambda: new_leader(kazoo_client, p, coordinator.leader),
        SESSION_TIMEOUT_MS / 1000 + 20,
        what="a new coordinator",
    )
    read_until(
        lambda: len(first) == PARTITIONS and all(len(o) >= 2 * third for o in first.values()), 60
    )

    def commit() -> bool:
        try:
            consumer.commit()
            return True
        except kafka.errors.KafkaError:
            return False

    wait_until(commit, 60, what="a commit on the new coordinator")
    committed = {q: offsets[-1] + 1 for q, offsets in first.items()}
    consumer.close(autocommit=False)

    second: dict[int, list[int]] = {}
    resumed = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap(cluster),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    resumed.subscribe([TOPIC])
    deadline = time.monotonic() + 90
    sizes = {q: len(v) for q, v in produced.items()}
    while time.monotonic() < deadline and not all(
        second.get(q, [committed[q] - 1])[-1] == n - 1 for q, n in sizes.items()
    ):
        for tp, msgs in resumed.poll(timeout_ms=500).items():
            second.setdefault(tp.partition, []).extend(m.offset for m in msgs)
    resumed.close(autocommit=False)
    check_resumed(produced, first, committed, second)
