"""read_committed over the tiered boundary (Kafka's TransactionsWithTieredStoreTest and
OffloadAndTxnConsumeFromLeaderTest, adapted): transactional data and markers are offloaded
segment by segment, the copy task stops at the LSO, and a read_committed consumer reading
from the remote tier, across the boundary and from the local tier sees committed data only.

This test plays the coordinator over the wire (transactional Produce, WriteTxnMarkers)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.helpers.poll import wait_until
from tests.helpers.txn_wire import (
    NO_VERIFICATION,
    PAD,
    READ_UNCOMMITTED,
    TxnWriter,
    consume_committed,
    fetch,
    visible,
)
from tests.helpers.wire import EARLIEST_LOCAL, LATEST_TIERED
from tests.tiered.e2e.e2e_helpers import N, TieredBroker, recipe, tiered_broker, value_of
from tierlog.client import WireConnection
from tierlog.protocol.records import scan_batches


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredBroker]:
    with tiered_broker(tmp_path_factory.mktemp("tiered-txn"), NO_VERIFICATION) as tb:
        yield tb


def _offsets(tiered: TieredBroker, topic: str) -> tuple[int, int]:
    """(last tiered offset, earliest local offset)."""
    return (
        tiered.list_offsets(topic, 0, LATEST_TIERED)[1],
        tiered.list_offsets(topic, 0, EARLIEST_LOCAL)[1],
    )


def _committed(values: list[bytes | None]) -> list[bytes]:
    return [v.removesuffix(PAD) for v in values if v is not None]


def _confluent_read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-e2e",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(bytes(m.value() or b""))
        return [v.removesuffix(PAD) for v in got]
    finally:
        c.close()


def _kafka_python_read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        isolation_level="read_committed",
    )
    try:
        tp = KpTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got.extend(bytes(r.value) for r in records)
        return [v.removesuffix(PAD) for v in got]
    finally:
        c.close()


def test_aborts_across_tiered_segments_are_invisible_to_read_committed(
    tiered: TieredBroker,
) -> None:
    """Five batches a segment. Segment [0,4] holds the data of A (aborted) and B
    (committed) and is tiered and deleted locally with A's ABORT marker in the next segment;
    C aborts within [5,9]; E aborts in [10,14], which stays local, so a read from the remote
    tier collects aborts from the local tier too."""
    topic = "txn-tiered"
    tiered.create_topic(topic, 1, recipe())
    with WireConnection.to_bootstrap(tiered.bootstrap) as conn:
        w = TxnWriter(conn, topic)
        a, b, c, d, e, plain = 11, 12, 13, 14, 15, 16
        for i, pid in enumerate([a, b, a, b, a]):  # 0..4
            w.send(pid, b"%d-%d" % (pid, i))
        w.end(a, commit=False)  # 5: A's marker one segment after its data
        w.send(b, b"12-6")  # 6
        w.end(b, commit=True)  # 7
        w.send(c, b"13-8")  # 8
        w.end(c, commit=False)  # 9
        w.send(d, b"14-10")  # 10
        w.end(d, commit=True)  # 11
        w.send(plain, b"plain-12", transactional=False)  # 12
        w.send(e, b"15-13")  # 13
        w.end(e, commit=False)  # 14
        w.send(plain, b"plain-15", transactional=False)  # 15, rolls [10,14]
        expected = [b"12-1", b"12-3", b"12-6", b"14-10", b"plain-12", b"plain-15"]

        wait_until(lambda: _offsets(tiered, topic) == (14, 15), 30, what="[0,14] tiered")
        first = fetch(conn, topic, 0, 0)
        assert first.aborted == [(a, 0)]  # from the remote index of [5,9]
        values, lso = consume_committed(conn, topic, 0)
        assert _committed(values) == expected
        assert lso == 16
        # from the middle of a remote segment, and at the boundary
        assert _committed(consume_committed(conn, topic, 0, start=3)[0]) == expected[1:]
        assert _committed(consume_committed(conn, topic, 0, start=13)[0]) == expected[-1:]

        everything = []
        offset = 0
        while offset < 16:
            got = fetch(conn, topic, 0, offset, isolation_level=READ_UNCOMMITTED)
            assert got.aborted is None
            everything.extend(_committed(visible(got.records, None)))
            offset = scan_batches(got.records)[-1].next_offset
        assert len(everything) == 11  # every data record, aborted ones included

    assert _confluent_read_committed(tiered.bootstrap, topic, len(expected)) == expected
    assert _kafka_python_read_committed(tiered.bootstrap, topic, len(expected)) == expected


def test_an_open_transaction_holds_tiering_at_the_lso_until_its_marker(
    tiered: TieredBroker,
) -> None:
    topic = "txn-hung"
    tiered.create_topic(topic, 1, recipe())
    with WireConnection.to_bootstrap(tiered.bootstrap) as conn:
        w = TxnWriter(conn, topic)
        hung, other = 21, 22
        for i in range(5):  # [0,4]
            w.send(other, b"o-%d" % i, transactional=False)
        w.send(hung, b"h-5")  # 5: opens a transaction in [5,9]
        for i in range(6, 16):  # [6,9], [10,14], 15
            w.send(other, b"o-%d" % i, transactional=False)
        wait_until(lambda: _offsets(tiered, topic)[0] == 4, 30, what="[0,4] tiered")
        assert fetch(conn, topic, 0, 0).last_stable_offset == 5
        assert tiered.list_offsets(topic, 0, LATEST_TIERED)[1] == 4  # nothing past the LSO
        w.end(hung, commit=False)  # 16
        w.send(other, b"o-17", transactional=False)
        wait_until(lambda: _offsets(tiered, topic)[0] >= 14, 30, what="tiering resumed")
        values, lso = consume_committed(conn, topic, 0)
        assert lso == 18
        assert _committed(values) == [b"o-%d" % i for i in range(18) if i not in (5, 16)]


def test_transactional_producer_offloads_and_read_committed_consumes_from_the_leader(
    tiered: TieredBroker,
) -> None:
    """Kafka's TransactionsWithTieredStoreTest / OffloadAndTxnConsumeFromLeaderTest with a
    real transactional producer: aborted and committed transactions alternate, segments are
    offloaded and deleted locally (nothing past the LSO), and read_committed consumers read
    committed data only from the remote tier, across the boundary and the local tail."""
    topic = "txn-producer-tiered"
    tiered.create_topic(topic, 1, recipe())
    p = Producer(
        {"bootstrap.servers": tiered.bootstrap, "transactional.id": "tiered-1", "linger.ms": 0}
    )
    p.init_transactions(30)
    committed: list[bytes] = []
    for i in range(12):
        p.begin_transaction()
        values = [b"t%02d-%d" % (i, j) for j in range(2)]
        for v in values:
            p.produce(topic, v + PAD, partition=0)
            p.flush(30)  # one batch per record
        if i % 3 == 0:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed.extend(values)
    p.flush(30)
    # 24 records, 12 markers; EndTxn answers before the coordinator writes the markers
    wait_until(lambda: tiered.list_offsets(topic, 0, -1)[1] == 36, 30, what="the last marker")

    # where the segments roll depends on how markers and records interleave (a batch whose
    # timestamp ties the last one adds no time-index entry), so wait for the copy to reach the
    # only local segment left, the active one, wherever it starts
    def all_but_the_tail_tiered() -> bool:
        local = tiered.local_segments(topic)
        return len(local) == 1 and _offsets(tiered, topic) == (local[0] - 1, local[0])

    wait_until(all_but_the_tail_tiered, 30, what="all but the tail tiered")
    assert tiered.local_segments(topic)[0] >= 36 - 8  # an active segment holds <= 8 batches
    assert _confluent_read_committed(tiered.bootstrap, topic, len(committed)) == committed
    assert _kafka_python_read_committed(tiered.bootstrap, topic, len(committed)) == committed


_HUNG_PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "hung",
              "transaction.timeout.ms": 3000, "linger.ms": 0})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce(sys.argv[2], b"hung-%d" % i + b"." * 64, partition=0)
    p.flush(30)
print("in-transaction", flush=True)
time.sleep(600)
"""


def test_a_producer_killed_mid_transaction_is_aborted_and_tiering_resumes(
    tmp_path: Path,
) -> None:
    """The producer is SIGKILLed inside its transaction: the coordinator aborts it after
    ``transaction.timeout.ms``, the LSO moves past it and the segments after it are tiered."""
    topic = "txn-killed"
    overrides = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}
    with tiered_broker(tmp_path, overrides) as tb:
        tb.create_topic(topic, 1, recipe())
        tb.produce(topic, range(2))  # 0, 1
        proc = subprocess.Popen(
            [sys.executable, "-c", _HUNG_PRODUCER, tb.bootstrap, topic],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "in-transaction"
            tb.produce(topic, range(2, 12))  # 5..14 after the hung data at 2..4
        finally:
            proc.kill()
            proc.wait(10)
        with WireConnection.to_bootstrap(tb.bootstrap) as conn:
            assert fetch(conn, topic, 0, 0).last_stable_offset == 2
            assert _offsets(tb, topic)[0] == -1  # [0,4] holds the open transaction
            wait_until(
                lambda: fetch(conn, topic, 0, 0).last_stable_offset > 2,
                30,
                what="the coordinator's abort of the timed-out transaction",
            )
            tb.produce(topic, range(12, 18))
            wait_until(lambda: _offsets(tb, topic)[0] >= 9, 30, what="tiering resumed")
            values, _ = consume_committed(conn, topic, 0)
        assert not [v for v in _committed(values) if v.startswith(b"hung")]
        assert len(values) == 18


def test_read_committed_from_the_leader_fetches_each_remote_segment_and_index_boundedly(
    tmp_path: Path,
) -> None:
    """Kafka's OffloadAndTxnConsumeFromLeaderTest: six tiered segments, a remote index cache
    of one byte (every index lookup goes to the store), a read_committed consumer from 0. The
    search for aborted transactions skips the segments uploaded with an empty ``.txnindex``
    instead of loading every later segment's indexes on every fetch (which would be 21 loads
    of each index for 6 segments): at most 12 segment fetches and 12 fetches of each index,
    and none of a transaction index."""
    topic = "txn-fetch-count"
    overrides = {"remote.log.index.file.cache.total.size.bytes": "1"}
    with tiered_broker(tmp_path, overrides) as tb:
        tb.create_topic(topic, 1, recipe())
        tb.produce(topic, range(6 * N + 1))
        tb.wait_tiered_up_to(topic, 6 * N)
        got = _confluent_read_committed(tb.bootstrap, topic, 6 * N + 1)
        assert got == [value_of(i).removesuffix(PAD) for i in range(6 * N + 1)]
        assert len(tb.events(topic, "FETCH")) <= 12
        by_type: dict[str | None, int] = {}
        for e in tb.events(topic, "FETCH_INDEX"):
            by_type[e.index_type] = by_type.get(e.index_type, 0) + 1
        assert by_type.get("TRANSACTION", 0) == 0
        assert all(n <= 12 for n in by_type.values()), by_type
