"""Replication with real ``tierlog serve`` processes on a real ZooKeeper
(spec/kafka-replication.md §3-5, §7): three brokers listed to clients, acks=all produce to an
RF=3 ``min.insync.replicas=2`` topic consumed back, failover after ``kill -9`` of the leader
with every acknowledged record present exactly once and in order, NOT_ENOUGH_REPLICAS with
two of three brokers down, and a follower truncating what the new leader never had."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers import cluster as cluster_helpers
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.znodes import PartitionState
from tierlog.protocol.api_keys import ApiKey

SESSION_TIMEOUT_MS = cluster_helpers.SESSION_TIMEOUT_MS
TOPIC = "replicated"


_start_cluster = cluster_helpers.start_cluster
_bootstrap = cluster_helpers.bootstrap


def _full_isr(kazoo: KazooClient) -> bool:
    """Every broker of the three is in the partition's ISR."""
    s = _state(kazoo)
    return s is not None and sorted(s.isr) == [1, 2, 3]


def _rejoined_and_progressing(
    kazoo: KazooClient, rec: Recorder, acked_before: int, broker_id: int
) -> None:
    """A restarted broker is back in the ISR and the producer has gone on acknowledging."""
    wait_until(partial(_full_isr, kazoo), 30, what=f"broker {broker_id} back in the ISR")
    wait_until(partial(_acked_past, rec, acked_before + 20), 30, what="progress")


def _acked_past(rec: Recorder, count: int) -> bool:
    return len(rec.acked) > count


def _state(kazoo: KazooClient, topic: str = TOPIC, p: int = 0) -> PartitionState | None:
    path = paths.partition_state(topic, p)
    if kazoo.exists(path) is None:
        return None
    return PartitionState.decode(kazoo.get(path)[0])


def _state_once(
    kazoo: KazooClient, holds: Callable[[PartitionState], bool]
) -> PartitionState | None:
    """The partition's state once ``holds`` is true of it, for ``wait_until``."""
    s = _state(kazoo)
    return s if s is not None and holds(s) else None


def _create_topic(bootstrap: str, partitions: int = 1, rf: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(TOPIC, partitions, rf, config={"min.insync.replicas": "2"})],
        operation_timeout=15,
    )
    futures[TOPIC].result(30)


def _wait_hosted(brokers: dict[int, BrokerProcess], kazoo: KazooClient) -> None:
    """Every broker holds the partition (its local log exists, so it applied the state; the
    controller's first state has the full ISR before any broker looked)."""
    wait_until(
        partial(_full_isr, kazoo),
        20,
        what="full ISR",
    )
    wait_until(
        lambda: all((b.log_dir / f"{TOPIC}-0").is_dir() for b in brokers.values()),
        20,
        what="the partition on every broker",
    )


@pytest.fixture
def cluster(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> Iterator[dict[int, BrokerProcess]]:
    brokers = _start_cluster(broker_factory, zk_connect, kazoo_client)
    _create_topic(_bootstrap(brokers))
    _wait_hosted(brokers, kazoo_client)
    yield brokers


class Recorder:
    """Every send and its outcome (Jepsen-style): value -> (offset or None, error)."""

    def __init__(self, bootstrap: str, **extra: object) -> None:
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "message.timeout.ms": 60000,
                **extra,
            }
        )
        self.acked: dict[bytes, int] = {}
        self.failed: dict[bytes, str] = {}

    def _done(self, err: object, msg: confluent_kafka.Message) -> None:
        value = msg.value()
        assert value is not None
        if err is None:
            offset = msg.offset()
            assert offset is not None
            self.acked[value] = offset
        else:
            self.failed[value] = str(err)

    def send_one(self, value: bytes, poll_s: float = 0) -> None:
        self.producer.produce(TOPIC, value, partition=0, on_delivery=self._done)
        self.producer.poll(poll_s)

    def send(self, values: list[bytes], timeout_s: float = 60) -> None:
        for v in values:
            self.producer.produce(TOPIC, v, partition=0, on_delivery=self._done)
            self.producer.poll(0)
        assert self.producer.flush(timeout_s) == 0, "undelivered messages"


def _replica_fetch(
    conn: WireConnection,
    topic: str,
    replica: int,
    leader_epoch: int,
    offset: int,
    last_fetched_epoch: int = -1,
) -> Any:
    """One Fetch v12 of partition 0 as follower ``replica``, answered at once; the
    partition's answer."""
    r = conn.call(
        ApiKey.FETCH,
        12,
        replica_id=replica,
        max_wait=0,
        min_bytes=0,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": leader_epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": last_fetched_epoch,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
    )
    return r.responses[0].partitions[0]


def _consume_all(bootstrap: str, expected: int, timeout_s: float = 60) -> list[tuple[int, bytes]]:
    return [(o, v) for _, o, v in c.read_records(bootstrap, TOPIC, [0], expected, timeout_s)]


def test_three_brokers_listed_and_acks_all_consumed_back(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    bootstrap = _bootstrap(cluster)
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    assert md.controller_id in (1, 2, 3)
    part = md.topics[TOPIC].partitions[0]
    assert sorted(part.replicas) == [1, 2, 3] and sorted(part.isrs) == [1, 2, 3]
    kcat = subprocess.run(
        ["kcat", "-L", "-b", bootstrap], capture_output=True, text=True, timeout=30, check=True
    )
    assert kcat.stdout.count("broker ") >= 3 and " 3 brokers:" in kcat.stdout

    rec = Recorder(bootstrap)
    values = [b"v%05d" % i for i in range(300)]
    rec.send(values)
    assert not rec.failed and len(rec.acked) == len(values)
    got = _consume_all(bootstrap, len(values))
    assert [v for _, v in got] == values
    assert [o for o, _ in got] == list(range(len(values)))


def _segment_bytes(b: BrokerProcess, topic: str = TOPIC) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((b.log_dir / f"{topic}-0").glob("*.log")))


def test_kill_9_of_the_leader_loses_no_acknowledged_record(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """Jepsen's lost-write / duplicate / inconsistent-offsets checks (§9 scenario 22): every
    send and its outcome are recorded; after failover every acked value is read exactly
    once, in the order of its offset, and the new leader's epoch is higher."""
    bootstrap = _bootstrap(cluster)
    before = _state(kazoo_client)
    assert before is not None
    rec = Recorder(bootstrap, **{"enable.idempotence": True})
    rec.send([b"a%05d" % i for i in range(200)])
    cluster[before.leader].kill()
    rec.send([b"b%05d" % i for i in range(200)], timeout_s=90)
    after = wait_until(
        lambda: _state_once(kazoo_client, lambda s: s.leader != before.leader),
        20,
        what="a new leader",
    )
    assert after.leader_epoch > before.leader_epoch
    assert len(rec.acked) == 400 and not rec.failed
    got = _consume_all(_bootstrap(cluster), len(rec.acked))
    values = [v for _, v in got]
    assert len(values) == len(set(values)), "no value twice"
    assert sorted(rec.acked, key=rec.acked.__getitem__) == values, "acked values in order"
    assert all(rec.acked[v] == o for o, v in got), "acknowledged offsets are the read ones"

    cluster[before.leader].start(timeout_s=SESSION_TIMEOUT_MS / 1000 + 30)
    wait_until(
        partial(_full_isr, kazoo_client),
        30,
        what="the restarted broker back in the ISR",
    )
    wait_until(
        lambda: len({_segment_bytes(b) for b in cluster.values()}) == 1,
        30,
        what="identical replicas",
    )


def _produce(bootstrap: str, acks: int, value: bytes, timeout_ms: int = 5000) -> int:
    """One Produce over the wire; returns the partition's error code."""
    from tierlog.protocol.records import SimpleRecord, build_batch

    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(
            ApiKey.PRODUCE,
            9,
            transactional_id=None,
            acks=acks,
            timeout=timeout_ms,
            topic_data=[
                {
                    "name": TOPIC,
                    "partition_data": [
                        {"index": 0, "records": build_batch([SimpleRecord(value, None)])}
                    ],
                }
            ],
        )
    return int(r.responses[0].partition_responses[0].error_code)


def test_min_insync_replicas_with_two_of_three_down(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    state = _state(kazoo_client)
    assert state is not None
    leader = cluster[state.leader]
    followers = [b for i, b in cluster.items() if i != state.leader]
    for b in followers:
        b.stop()
    wait_until(
        lambda: (s := _state(kazoo_client)) is not None and list(s.isr) == [state.leader],
        20,
        what="ISR shrunk to the leader",
    )
    wait_until(lambda: _produce(leader.bootstrap, -1, b"x") == 19, 10, what="NOT_ENOUGH_REPLICAS")
    assert _produce(leader.bootstrap, 1, b"y") == 0, "acks=1 still succeeds"
    for b in followers:
        b.start()
    wait_until(
        partial(_full_isr, kazoo_client),
        30,
        what="the ISR expands again",
    )
    assert _produce(leader.bootstrap, -1, b"z") == 0


def test_a_follower_truncates_records_the_new_leader_never_got(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """KIP-101/279: the old leader appended records (acks=1) its followers never got, died,
    and an unclean election made a follower leader; when it returns as a follower it
    truncates them, and every replica ends byte-identical to the new leader."""
    brokers = _start_cluster(broker_factory, zk_connect, kazoo_client)
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    admin.create_topics(
        [
            NewTopic(
                TOPIC,
                1,
                3,
                config={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
            )
        ]
    )[TOPIC].result(30)
    _wait_hosted(brokers, kazoo_client)
    old = _state(kazoo_client)
    assert old is not None
    leader = brokers[old.leader]
    wait_until(lambda: _produce(leader.bootstrap, -1, b"kept") == 0, 20, what="a first produce")
    followers = {i: b for i, b in brokers.items() if i != old.leader}
    wait_until(
        lambda: all(b"kept" in _segment_bytes(b) for b in followers.values()),
        10,
        what="followers have the committed record",
    )
    for b in followers.values():
        b.stop()
    wait_until(
        lambda: (s := _state(kazoo_client)) is not None and list(s.isr) == [old.leader],
        20,
        what="ISR shrunk to the leader",
    )
    for i in range(5):
        assert _produce(leader.bootstrap, 1, b"lost%d" % i) == 0
    leader.kill()
    for b in followers.values():
        b.start()
    new = wait_until(
        lambda: _state_once(kazoo_client, lambda s: s.leader in followers),
        30,
        what="an unclean leader",
    )
    assert new.leader_epoch > old.leader_epoch
    wait_until(
        lambda: _produce(brokers[new.leader].bootstrap, 1, b"after") == 0, 20, what="produce"
    )
    leader.start(timeout_s=SESSION_TIMEOUT_MS / 1000 + 30)
    wait_until(
        lambda: len({_segment_bytes(b) for b in brokers.values()}) == 1,
        30,
        what="identical replicas",
    )
    data = _segment_bytes(leader)
    assert b"kept" in data and b"after" in data and b"lost" not in data


def test_leader_rules_on_the_wire(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """NOT_LEADER_OR_FOLLOWER off the leader; FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH by
    ``current_leader_epoch`` on Fetch, ListOffsets and OffsetForLeaderEpoch (KIP-320), and
    OffsetForLeaderEpoch answered from the epoch cache."""

    first = _state(kazoo_client)
    assert first is not None
    cluster[max(i for i in cluster if i != first.leader)].stop()
    state = wait_until(
        lambda: _state_once(kazoo_client, lambda s: len(s.isr) == 2),
        20,
        what="a controller-written state (epoch bumped)",
    )
    epoch = state.leader_epoch
    assert epoch > first.leader_epoch and state.leader == first.leader
    wait_until(
        lambda: _produce(cluster[state.leader].bootstrap, -1, b"one") == 0, 10, what="produce"
    )

    def errors(bootstrap: str, current: int) -> tuple[int, int, int, tuple[int, int]]:
        with WireConnection.to_bootstrap(bootstrap) as conn:
            fetch = conn.call(
                ApiKey.FETCH,
                12,
                replica_id=-1,
                max_wait=0,
                min_bytes=0,
                topics=[
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": current,
                                "fetch_offset": 0,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                forgotten_topics_data=[],
            )
            listed = conn.call(
                ApiKey.LIST_OFFSETS,
                7,
                replica_id=-1,
                topics=[
                    {
                        "name": TOPIC,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": current, "timestamp": -2}
                        ],
                    }
                ],
            )
            epochs = conn.call(
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                4,
                replica_id=-1,
                topics=[
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                        ],
                    }
                ],
            )
        e = epochs.topics[0].partitions[0]
        return (
            int(fetch.responses[0].partitions[0].error_code),
            int(listed.topics[0].partitions[0].error_code),
            int(e.error_code),
            (int(e.leader_epoch), int(e.end_offset)),
        )

    leader = cluster[state.leader].bootstrap
    ok = errors(leader, epoch)
    assert ok[:3] == (0, 0, 0)
    assert ok[3][0] == epoch and ok[3][1] >= 1, "the latest epoch ends at the LEO"
    assert errors(leader, -1)[:3] == (0, 0, 0)
    assert errors(leader, epoch - 1)[:3] == (74, 74, 74)
    assert errors(leader, epoch + 1)[:3] == (75, 75, 75)
    follower = next(b for i, b in cluster.items() if i != state.leader and b.running)
    assert errors(follower.bootstrap, epoch)[:3] == (6, 6, 6)


def test_a_diverged_follower_fetch_gets_the_diverging_epoch(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """L-8.4 on the wire (Fetch v12, truncation on fetch): a follower whose
    ``last_fetched_epoch`` ends before its fetch offset gets no records and
    ``diverging_epoch`` = (that epoch, where it ends here); one whose epoch the leader cannot
    place gets OFFSET_OUT_OF_RANGE; one that has not diverged reads on."""
    from tierlog.protocol.errors import ErrorCode

    state = _state(kazoo_client)
    assert state is not None
    epoch = state.leader_epoch
    for value in (b"a", b"b", b"c"):
        assert _produce(cluster[state.leader].bootstrap, -1, value) == 0
    follower = next(r for r in state.isr if r != state.leader)

    def fetch(last_fetched_epoch: int, offset: int) -> Any:
        with WireConnection.to_bootstrap(cluster[state.leader].bootstrap) as conn:
            return _replica_fetch(conn, TOPIC, follower, epoch, offset, last_fetched_epoch)

    diverged = fetch(epoch, 10)
    assert int(diverged.error_code) == 0 and not diverged.records
    assert (int(diverged.diverging_epoch.epoch), int(diverged.diverging_epoch.end_offset)) == (
        epoch,
        3,
    )
    unknown = fetch(epoch + 1, 3)
    assert int(unknown.error_code) == ErrorCode.OFFSET_OUT_OF_RANGE and not unknown.records
    reads_on = fetch(epoch, 3)  # at its LEO: a fetch offset below would move its state back
    assert int(reads_on.error_code) == 0
    assert int(reads_on.diverging_epoch.epoch) == -1


def test_not_leader_answer_names_the_current_leader(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """KIP-951: a Produce (v10+) to a broker that does not lead the partition answers
    NOT_LEADER_OR_FOLLOWER with the leader's id and epoch in ``current_leader`` and its
    endpoint in ``node_endpoints``, so the client skips a Metadata round trip; older
    versions get the bare error."""
    from tierlog.protocol.records import SimpleRecord, build_batch

    state = _state(kazoo_client)
    assert state is not None
    follower = next(b for i, b in cluster.items() if i != state.leader)

    def produce(version: int) -> object:
        with WireConnection.to_bootstrap(follower.bootstrap) as conn:
            return conn.call(
                ApiKey.PRODUCE,
                version,
                transactional_id=None,
                acks=-1,
                timeout=5000,
                topic_data=[
                    {
                        "name": TOPIC,
                        "partition_data": [
                            {"index": 0, "records": build_batch([SimpleRecord(b"v", None)])}
                        ],
                    }
                ],
            )

    r: Any = produce(10)
    p = r.responses[0].partition_responses[0]
    assert int(p.error_code) == 6
    assert (int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)) == (
        state.leader,
        state.leader_epoch,
    )
    host, port = cluster[state.leader].host_port
    assert [(int(e.node_id), e.host, int(e.port)) for e in r.node_endpoints] == [
        (state.leader, host, port)
    ]
    old: Any = produce(9)
    assert int(old.responses[0].partition_responses[0].error_code) == 6


def test_acks_all_times_out_while_a_follower_in_the_isr_is_stalled(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """L-7: a pending acks=all answers REQUEST_TIMED_OUT at the request's timeout; once the
    stalled follower leaves the ISR (its session expires) acks=all succeeds again."""
    import signal

    state = _state(kazoo_client)
    assert state is not None
    stalled = next(b for i, b in cluster.items() if i != state.leader)
    os.kill(stalled.pid, signal.SIGSTOP)
    try:
        assert _produce(cluster[state.leader].bootstrap, -1, b"slow", timeout_ms=300) == 7
        wait_until(
            lambda: (s := _state(kazoo_client)) is not None and len(s.isr) == 2,
            20,
            what="the stalled follower leaves the ISR",
        )
        assert _produce(cluster[state.leader].bootstrap, -1, b"fast") == 0
    finally:
        os.kill(stalled.pid, signal.SIGCONT)


def test_a_follower_behind_the_leaders_log_start_restarts_there(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """F-11: the leader's log start moved past a stopped follower's LEO (DeleteRecords);
    back, the follower gets OFFSET_OUT_OF_RANGE, restarts its log at the leader's log start
    and rejoins the ISR."""

    state = _state(kazoo_client)
    assert state is not None
    leader = cluster[state.leader]
    lagging_id = max(i for i in cluster if i != state.leader)
    lagging = cluster[lagging_id]
    lagging.stop()
    wait_until(
        lambda: (s := _state(kazoo_client)) is not None and lagging_id not in s.isr,
        20,
        what="ISR without the stopped follower",
    )
    for i in range(20):

        def produced(value: bytes = b"r%d" % i) -> bool:
            return _produce(leader.bootstrap, -1, value) == 0

        wait_until(produced, 10, what="produce")
    with WireConnection.to_bootstrap(leader.bootstrap) as conn:
        r = conn.call(
            ApiKey.DELETE_RECORDS,
            2,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 20}]}],
            timeout=5000,
        )
    p = r.topics[0].partitions[0]
    assert (int(p.error_code), int(p.low_watermark)) == (0, 20)
    lagging.start()
    wait_until(
        partial(_full_isr, kazoo_client),
        30,
        what="the follower back in the ISR",
    )
    assert "restarting the log at 20" in lagging.stderr
    assert _produce(leader.bootstrap, -1, b"last") == 0


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka", "kcat"])
def test_each_client_lists_three_brokers_and_reads_back_acks_all(
    cluster: dict[int, BrokerProcess], client: str, tmp_path: Path
) -> None:
    """Acceptance 1 of issue 13, per client: the three brokers are listed, and an
    idempotent acks=all produce to the RF=3, min.insync.replicas=2 topic reads back whole."""
    import asyncio

    import aiokafka
    import kafka

    from tests.clients.real_clients import (
        AiokafkaDriver,
        ConfluentDriver,
        Driver,
        KafkaPythonDriver,
        KcatDriver,
    )

    bootstrap = _bootstrap(cluster)
    drivers: dict[str, type[ConfluentDriver | KafkaPythonDriver | AiokafkaDriver]] = {
        "confluent-kafka": ConfluentDriver,
        "kafka-python": KafkaPythonDriver,
        "aiokafka": AiokafkaDriver,
    }
    driver: Driver = KcatDriver(tmp_path / "kcat") if client == "kcat" else drivers[client]()
    if client == "confluent-kafka":
        listed = set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)
    elif client == "kafka-python":
        consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            assert TOPIC in consumer.topics()
            listed = {b.node_id for b in consumer._client.cluster.brokers()}
        finally:
            consumer.close()
    elif client == "aiokafka":

        async def brokers() -> set[int]:
            p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
            await p.start()
            try:
                return {b.nodeId for b in p.client.cluster.brokers()}
            finally:
                await p.stop()

        listed = asyncio.run(brokers())
    else:
        out = subprocess.run(
            ["kcat", "-L", "-b", bootstrap], capture_output=True, text=True, timeout=30, check=True
        ).stdout
        listed = {int(m) for m in re.findall(r"broker (\d+) at", out)}
    assert listed == {1, 2, 3}

    values = [f"{client}-{i:04d}".encode() for i in range(50)]
    driver.produce(bootstrap, TOPIC, [(0, v) for v in values], idempotent=client != "kcat")
    seen = driver.consume_assigned(bootstrap, TOPIC, 0, len(values))
    assert [v for _, _, v in seen] == values
    assert [o for _, o, _ in seen] == list(range(len(values)))


KILL_ROUNDS = 100 if os.environ.get("TIERLOG_SOAK", "") not in ("", "0") else 20
"""Acceptance 2 of issue 13: 20 rounds in ``make test``, 100 under ``make soak``."""


def test_kill_loop_keeps_every_acknowledged_record_once_in_order(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """Acceptance 2 of issue 13: an idempotent acks=all producer runs while the leader or a
    random broker is killed with kill -9 and restarted, ``KILL_ROUNDS`` times. At the end
    every acknowledged record is present exactly once, in order, all replicas are back in
    the ISR, and every replica's log is byte-identical."""
    import random
    import threading

    rng = random.Random(13)
    rec = Recorder(
        _bootstrap(cluster), **{"enable.idempotence": True, "message.timeout.ms": 120000}
    )
    stop = threading.Event()
    sent: list[bytes] = []

    def produce() -> None:
        i = 0
        while not stop.is_set():
            value = b"k%06d" % i
            sent.append(value)
            rec.send_one(value, poll_s=0.005)
            i += 1

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        for round_ in range(KILL_ROUNDS):
            state = _state(kazoo_client)
            assert state is not None
            victim = state.leader if round_ % 2 == 0 else rng.choice(sorted(cluster))
            before = len(rec.acked)
            cluster[victim].kill()
            wait_until(
                partial(
                    _state_once,
                    kazoo_client,
                    partial(lambda v, s: v not in s.isr and s.leader not in (v, -1), victim),
                ),
                20,
                what=f"round {round_}: broker {victim} out of the ISR",
            )
            cluster[victim].start(timeout_s=SESSION_TIMEOUT_MS / 1000 + 30)
            _rejoined_and_progressing(kazoo_client, rec, before, victim)
    finally:
        stop.set()
        producer.join(10)
    assert rec.producer.flush(120) == 0
    assert not rec.failed, list(rec.failed.items())[:3]
    assert len(rec.acked) == len(sent)
    got = _consume_all(_bootstrap(cluster), len(rec.acked), timeout_s=90)
    values = [v for _, v in got]
    assert len(values) == len(set(values)), "no value twice"
    assert values == sent, "every acknowledged value once, in send order"
    assert all(rec.acked[v] == o for o, v in got)
    wait_until(
        lambda: len({_segment_bytes(b) for b in cluster.values()}) == 1,
        30,
        what="identical replicas",
    )


def test_a_caught_up_follower_outside_the_isr_holds_the_hw_until_it_rejoins(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """L-11 with L-13, on the wire: the test is follower 99 of an RF=2 partition (a broker
    registration of its own in ZooKeeper), so the order of appends and fetches is exact.
    Once out of the ISR, it fetches after every append, always reaching the LEO its previous
    fetch saw: caught up, never at the LEO. A leader alone in the ISR whose HW ran with its
    own LEO would never see this follower's LEO reach the HW, so the follower could never
    rejoin; Kafka's maybeIncrementLeaderHW holds the HW at a caught-up follower's LEO, and it
    rejoins on its next fetch."""
    from tierlog.cluster.znodes import BrokerRegistration
    from tierlog.config import Endpoint

    fake = 99
    kazoo_client.create(
        paths.broker(fake),
        BrokerRegistration(fake, (Endpoint("PLAINTEXT", "127.0.0.1", 1),)).encode(),
        ephemeral=True,
    )
    leader_id = 1
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster)})
    topic = "pair"

    def created() -> bool:
        """The controller refuses the assignment until its watch has seen broker 99."""
        futures = admin.create_topics(
            [NewTopic(topic, 1, replica_assignment=[[leader_id, fake]])], operation_timeout=15
        )
        try:
            futures[topic].result(30)
        except confluent_kafka.KafkaException as e:
            if e.args[0].code() != confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT:
                raise
            return False
        return True

    wait_until(created, 20, what="the topic created on brokers 1 and 99")
    wait_until(
        lambda: (s := _state(kazoo_client, topic)) is not None and list(s.isr) == [leader_id],
        30,
        what="follower 99, which never fetched, out of the ISR",
    )
    state = _state(kazoo_client, topic)
    assert state is not None
    leader = cluster[leader_id].bootstrap

    def append(conn: WireConnection) -> None:
        from tierlog.protocol.records import SimpleRecord, build_batch

        r = conn.call(
            ApiKey.PRODUCE,
            9,
            transactional_id=None,
            acks=1,
            timeout=5000,
            topic_data=[
                {
                    "name": topic,
                    "partition_data": [
                        {"index": 0, "records": build_batch([SimpleRecord(b"v", None)])}
                    ],
                }
            ],
        )
        assert r.responses[0].partition_responses[0].error_code == 0

    def fetch(conn: WireConnection, offset: int) -> tuple[int, int]:
        """A fetch as follower 99 at ``offset``; the leader's (HW, LSO) answer."""
        p = _replica_fetch(conn, topic, fake, state.leader_epoch, offset)
        assert p.error_code == 0
        return int(p.high_watermark), int(p.last_stable_offset)

    with WireConnection.to_bootstrap(leader) as conn:
        for _ in range(3):
            append(conn)
        fetch(conn, 0)
        append(conn)
        fetch(conn, 3)
        rejoined = False
        for offset in range(4, 24):
            append(conn)
            hw, _ = fetch(conn, offset)
            assert hw <= offset, "the HW waits for the caught-up follower"
            if (s := _state(kazoo_client, topic)) is not None and fake in s.isr:
                rejoined = True
                break
        if not rejoined:
            wait_until(
                lambda: (s := _state(kazoo_client, topic)) is not None and fake in s.isr,
                10,
                what="follower 99 back in the ISR",
            )


def test_create_topics_goes_through_the_controller(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """Z-13: only the controller creates (NOT_CONTROLLER elsewhere), with an explicit
    replica_assignment kept as given; an invalid config is refused."""
    from tierlog.cluster.election import read_controller
    from tierlog.cluster.znodes import TopicAssignment

    brokers = _start_cluster(broker_factory, zk_connect, kazoo_client)
    controller = read_controller(kazoo_client)
    assert controller is not None
    other = next(b for i, b in brokers.items() if i != controller)

    def create(bootstrap: str, name: str, **fields: object) -> tuple[int, str | None]:
        with WireConnection.to_bootstrap(bootstrap) as conn:
            r = conn.call(
                ApiKey.CREATE_TOPICS,
                5,
                topics=[{"name": name, "configs": [], **fields}],
                timeout=10000,
                validate_only=False,
            )
        t = r.topics[0]
        return int(t.error_code), t.error_message

    explicit = {
        "num_partitions": -1,
        "replication_factor": -1,
        "assignments": [
            {"partition_index": 0, "broker_ids": [3, 1]},
            {"partition_index": 1, "broker_ids": [2, 3]},
        ],
    }
    assert create(other.bootstrap, "t1", **explicit)[0] == 41
    assert create(brokers[controller].bootstrap, "t1", **explicit) == (0, None)
    stored = TopicAssignment.decode(kazoo_client.get(paths.topic("t1"))[0])
    assert stored.partitions == {0: (3, 1), 1: (2, 3)}
    assert _state(kazoo_client, "t1", 0) == PartitionState(3, 0, (3, 1), _state_epoch(kazoo_client))
    code, message = create(
        brokers[controller].bootstrap,
        "tiered",
        num_partitions=1,
        replication_factor=3,
        configs=[{"name": "remote.storage.enable", "value": "true"}],
    )
    assert code == 40, message
    assert (
        create(brokers[controller].bootstrap, "t1", num_partitions=1, replication_factor=3)[0] == 36
    ), "TOPIC_ALREADY_EXISTS"


def _state_epoch(kazoo: KazooClient) -> int:
    from tierlog.cluster.election import read_controller_epoch

    return int(read_controller_epoch(kazoo)[0])


def test_rolling_restart_with_sigterm_loses_nothing(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """Acceptance 6 of issue 13 (without controlled shutdown yet): the brokers receive
    SIGTERM one after another while an idempotent acks=all producer runs; the application
    sees no error and every record is read back once, in order."""
    import threading

    rec = Recorder(
        _bootstrap(cluster), **{"enable.idempotence": True, "message.timeout.ms": 120000}
    )
    stop = threading.Event()
    sent: list[bytes] = []

    def produce() -> None:
        i = 0
        while not stop.is_set():
            sent.append(b"r%06d" % i)
            rec.send_one(sent[-1], poll_s=0.005)
            i += 1

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        for broker_id in sorted(cluster):
            before = len(rec.acked)
            assert cluster[broker_id].stop() == 0
            cluster[broker_id].start()
            _rejoined_and_progressing(kazoo_client, rec, before, broker_id)
    finally:
        stop.set()
        producer.join(10)
    assert rec.producer.flush(120) == 0
    assert not rec.failed, list(rec.failed.items())[:3]
    got = _consume_all(_bootstrap(cluster), len(sent), timeout_s=90)
    assert [v for _, v in got] == sent


def test_sigterm_moves_leadership_before_the_broker_stops(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """Controlled shutdown (Z-9, Z-10): the stopping leader announces it, the controller
    elects another ISR member and drops the broker from the ISR while it still runs, and
    only then does it leave; acks=all keeps working on the new leader. The move is one new
    leader epoch: the stopping broker does not follow the leadership it gave up (Kafka's
    controller sends it StopReplica), so it is not taken back into the ISR (KIP-841), which
    would cost a second one."""
    state = _state(kazoo_client)
    assert state is not None
    leader = cluster[state.leader]
    assert leader.stop() == 0
    assert "controlled shutdown: no leadership left to move" in leader.stderr
    moved = _state(kazoo_client)
    assert moved is not None and moved.leader != state.leader
    assert moved.leader_epoch > state.leader_epoch and state.leader not in moved.isr
    assert _produce(cluster[moved.leader].bootstrap, -1, b"after") == 0
    final = _state(kazoo_client)
    assert final is not None and final.leader_epoch == state.leader_epoch + 1


def test_topics_describe_json_shows_leadership(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """``tierlog topics describe --json`` gains leader, leader_epoch, replicas and isr, and
    asks each partition's leader for its offsets whichever broker it bootstraps from."""
    import json
    import sys

    state = _state(kazoo_client)
    assert state is not None
    assert _produce(cluster[state.leader].bootstrap, -1, b"x") == 0
    follower = next(b for i, b in cluster.items() if i != state.leader)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tierlog",
            "topics",
            "describe",
            "--bootstrap-server",
            follower.bootstrap,
            "--topic",
            TOPIC,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    (p,) = json.loads(out)["partitions"]
    assert (p["leader"], p["leader_epoch"]) == (state.leader, state.leader_epoch)
    assert sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3]
    assert (p["log_start_offset"], p["high_watermark"]) == (0, 1)


def test_acks_all_does_not_wait_for_the_followers_long_poll(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """An append wakes the followers' fetches parked in the leader's purgatory, so acks=all
    takes a replication round trip, not ``replica.fetch.wait.max.ms``."""
    brokers = _start_cluster(
        broker_factory, zk_connect, kazoo_client, extra={"replica.fetch.wait.max.ms": "3000"}
    )
    _create_topic(_bootstrap(brokers))
    _wait_hosted(brokers, kazoo_client)
    state = _state(kazoo_client)
    assert state is not None
    leader = brokers[state.leader].bootstrap
    wait_until(lambda: _produce(leader, -1, b"first") == 0, 20, what="a first produce")
    for i in range(5):
        started = time.monotonic()
        assert _produce(leader, -1, b"v%d" % i) == 0
        assert time.monotonic() - started < 1.5


def test_a_topic_gone_from_zookeeper_is_not_served_from_local_leftovers(
    cluster: dict[int, BrokerProcess], kazoo_client: KazooClient
) -> None:
    """Cluster topics are only what ZooKeeper holds: once the topic's znodes are gone, its
    local logs answer UNKNOWN_TOPIC_OR_PARTITION instead of a single-node leader."""
    state = _state(kazoo_client)
    assert state is not None
    leader = cluster[state.leader].bootstrap
    wait_until(lambda: _produce(leader, -1, b"before") == 0, 20, what="a first produce")
    kazoo_client.delete(paths.topic(TOPIC), recursive=True)
    wait_until(lambda: _produce(leader, 1, b"after") == 3, 20, what="UNKNOWN_TOPIC_OR_PARTITION")
    md = AdminClient({"bootstrap.servers": leader}).list_topics(TOPIC, timeout=10)
    assert md.topics[TOPIC].error is not None


def _as_kafka_left_it(partition_dir: Path, epoch: int) -> None:
    """Make ``partition_dir`` what Apache Kafka leaves after leading at ``epoch``: every
    batch stamped with it (``partitionLeaderEpoch``, bytes 12-16 of a v2 batch, outside the
    CRC) and a ``leader-epoch-checkpoint`` whose one entry is ``epoch 0``."""
    for segment in partition_dir.glob("*.log"):
        data = bytearray(segment.read_bytes())
        pos = 0
        while pos + 17 <= len(data):
            length = int.from_bytes(data[pos + 8 : pos + 12], "big")
            data[pos + 12 : pos + 16] = epoch.to_bytes(4, "big")
            pos += 12 + length
        segment.write_bytes(bytes(data))
    (partition_dir / "leader-epoch-checkpoint").write_text(f"0\n1\n{epoch} 0\n")


def test_a_leader_goes_above_the_epochs_of_a_kafka_written_partition_directory(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """R-3: a partition directory Apache Kafka wrote at leader epoch 57 is placed in
    ``log.dirs``; the controller's next epoch for it is far smaller, so the leader asks for
    58 (above its checkpoint), the state in ZooKeeper says 58, the checkpoint keeps 57 and
    gains 58 at the LEO, and the records before and after read back."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, n=1)
    c.create_topic(brokers, kazoo_client, "kdir", [[1]])
    c.produce(brokers[1].bootstrap, "kdir", [b"k0", b"k1", b"k2"])
    brokers[1].stop()
    _as_kafka_left_it(brokers[1].log_dir / "kdir-0", 57)
    brokers[1].start()
    bumped = wait_until(
        lambda: c.state_when(kazoo_client, "kdir", lambda s: s.leader_epoch == 58),
        30,
        what="the leader epoch above the checkpoint",
    )
    assert bumped.leader == 1
    c.produce(brokers[1].bootstrap, "kdir", [b"k3"])
    checkpoint = (brokers[1].log_dir / "kdir-0" / "leader-epoch-checkpoint").read_text()
    assert checkpoint.split("\n")[2:4] == ["57 0", "58 3"]
    assert c.consume(brokers[1].bootstrap, "kdir", 0, 4) == [b"k0", b"k1", b"k2", b"k3"]
