"""WriteTxnMarkers and read_committed against a real broker, this test playing the
coordinator over the wire (transactional Produce, then the markers Kafka's coordinator sends)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.txn_wire import (
    NO_VERIFICATION,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    consume_committed,
    fetch,
    list_offset,
    produce_txn,
    visible,
    write_markers,
)
from tests.helpers.wire import LATEST
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import scan_batches

TOPIC = "txn-orders"
PID_A, PID_B = 7001, 7002


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(NO_VERIFICATION)


def _connect(broker: BrokerProcess, partitions: int = 1) -> WireConnection:
    conn = WireConnection(*broker.host_port)
    assert conn.create_topic(TOPIC, partitions)[0] == 0
    return conn


def test_aborted_data_is_invisible_to_read_committed_and_committed_data_appears(
    broker: BrokerProcess,
) -> None:
    with _connect(broker) as conn:
        assert produce_txn(conn, TOPIC, 0, [b"a1", b"a2"], producer_id=PID_A) == (0, 0)
        assert produce_txn(conn, TOPIC, 0, [b"b1"], producer_id=PID_B) == (0, 2)
        open_ = fetch(conn, TOPIC, 0, 0)
        assert (open_.high_watermark, open_.last_stable_offset) == (3, 0)
        assert open_.records == b""
        assert open_.aborted == []  # at the LSO: empty, not null
        assert fetch(conn, TOPIC, 0, 0, isolation_level=READ_UNCOMMITTED).aborted is None

        assert write_markers(conn, [(TOPIC, 0)], producer_id=PID_A, commit=False) == {(TOPIC, 0): 0}
        assert fetch(conn, TOPIC, 0, 0).last_stable_offset == 2  # B still open at 2
        assert write_markers(conn, [(TOPIC, 0)], producer_id=PID_B, commit=True) == {(TOPIC, 0): 0}
        done = fetch(conn, TOPIC, 0, 0)
        assert done.last_stable_offset == done.high_watermark == 5
        assert done.aborted == [(PID_A, 0)]
        assert visible(done.records, done.aborted) == [b"b1"]
        assert consume_committed(conn, TOPIC, 0) == ([b"b1"], 5)

        raw = fetch(conn, TOPIC, 0, 0, isolation_level=READ_UNCOMMITTED)
        values = [v for v in visible(raw.records, None)]
        assert values == [b"a1", b"a2", b"b1"]
        assert [h.is_control for h in scan_batches(raw.records)] == [
            False,
            False,
            True,
            True,
        ]


def test_markers_refused_by_producer_and_coordinator_epoch_and_unknown_partitions(
    broker: BrokerProcess,
) -> None:
    with _connect(broker, partitions=2) as conn:
        assert produce_txn(conn, TOPIC, 0, [b"x"], producer_id=PID_A, epoch=3)[0] == 0
        codes = write_markers(
            conn, [(TOPIC, 0), (TOPIC, 5)], producer_id=PID_A, epoch=2, commit=True
        )
        assert codes == {
            (TOPIC, 0): ErrorCode.INVALID_PRODUCER_EPOCH,
            (TOPIC, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        ok = write_markers(
            conn, [(TOPIC, 0)], producer_id=PID_A, epoch=3, commit=True, coordinator_epoch=4
        )
        assert ok == {(TOPIC, 0): 0}
        fenced = write_markers(
            conn, [(TOPIC, 0)], producer_id=PID_A, epoch=3, commit=False, coordinator_epoch=3
        )
        assert fenced == {(TOPIC, 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert consume_committed(conn, TOPIC, 0) == ([b"x"], 2)


def test_non_transactional_write_inside_a_transaction_is_invalid_txn_state(
    broker: BrokerProcess,
) -> None:
    with _connect(broker) as conn:
        assert produce_txn(conn, TOPIC, 0, [b"t"], producer_id=PID_A)[0] == 0
        code, _ = produce_txn(
            conn,
            TOPIC,
            0,
            [b"plain"],
            producer_id=PID_A,
            sequence=1,
            transactional=False,
            transactional_id=None,
        )
        assert code == ErrorCode.INVALID_TXN_STATE


def test_an_open_transaction_and_an_abort_survive_kill_9(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"log.segment.bytes": "1024", **NO_VERIFICATION})
    with _connect(broker) as conn:
        assert produce_txn(conn, TOPIC, 0, [b"gone" * 100], producer_id=PID_A)[0] == 0
        for i in range(4):
            produce_txn(conn, TOPIC, 0, [b"v%d" % i * 100], producer_id=PID_B, sequence=i)
        write_markers(conn, [(TOPIC, 0)], producer_id=PID_A, commit=False)
        assert fetch(conn, TOPIC, 0, 0).last_stable_offset == 1  # B open from offset 1
    broker.restart(kill=True)
    with WireConnection(*broker.host_port) as conn:
        assert fetch(conn, TOPIC, 0, 0).last_stable_offset == 1
        write_markers(conn, [(TOPIC, 0)], producer_id=PID_B, commit=True)
        values, lso = consume_committed(conn, TOPIC, 0)
        assert values == [b"v%d" % i * 100 for i in range(4)]
        assert lso == 7


def test_list_offsets_read_committed_answers_the_lso(broker: BrokerProcess) -> None:
    t0 = int(time.time() * 1000) - 60_000
    with _connect(broker) as conn:
        produce_txn(conn, TOPIC, 0, [b"p"], producer_id=-1, transactional=False, timestamp=t0)
        produce_txn(conn, TOPIC, 0, [b"open"], producer_id=PID_A, timestamp=t0 + 1000)
        produce_txn(
            conn, TOPIC, 0, [b"later"], producer_id=-1, transactional=False, timestamp=t0 + 2000
        )
        assert list_offset(conn, TOPIC, 0, LATEST, isolation_level=READ_COMMITTED) == (0, 1)
        assert list_offset(conn, TOPIC, 0, LATEST, isolation_level=READ_UNCOMMITTED) == (0, 3)
        assert list_offset(conn, TOPIC, 0, t0, isolation_level=READ_COMMITTED) == (0, 0)
        # undecided data is not searchable by timestamp (Kafka's TransactionsTest)
        assert list_offset(conn, TOPIC, 0, t0 + 500, isolation_level=READ_COMMITTED) == (0, -1)
        assert list_offset(conn, TOPIC, 0, t0 + 500, isolation_level=READ_UNCOMMITTED) == (0, 1)
        write_markers(conn, [(TOPIC, 0)], producer_id=PID_A, commit=True)
        assert list_offset(conn, TOPIC, 0, LATEST, isolation_level=READ_COMMITTED) == (0, 4)
        assert list_offset(conn, TOPIC, 0, t0 + 500, isolation_level=READ_COMMITTED) == (0, 1)


def _describe_producers(conn: WireConnection, partition: int) -> tuple[int, dict[int, Any]]:
    r = conn.call(
        ApiKey.DESCRIBE_PRODUCERS, 0, topics=[{"name": TOPIC, "partition_indexes": [partition]}]
    )
    p = r.topics[0].partitions[0]
    return int(p.error_code), {int(s.producer_id): s for s in p.active_producers}


def test_describe_producers_shows_open_transactions_and_coordinator_epochs(
    broker: BrokerProcess,
) -> None:
    with _connect(broker) as conn:
        produce_txn(conn, TOPIC, 0, [b"x", b"y"], producer_id=PID_A, epoch=2)
        produce_txn(conn, TOPIC, 0, [b"i"], producer_id=PID_B, transactional=False)
        code, producers = _describe_producers(conn, 0)
        assert code == 0
        a, b = producers[PID_A], producers[PID_B]
        assert (a.producer_epoch, a.last_sequence, a.current_txn_start_offset) == (2, 1, 0)
        assert a.coordinator_epoch == -1
        assert (b.last_sequence, b.current_txn_start_offset) == (0, -1)
        write_markers(
            conn, [(TOPIC, 0)], producer_id=PID_A, epoch=2, commit=True, coordinator_epoch=4
        )
        a = _describe_producers(conn, 0)[1][PID_A]
        assert (a.current_txn_start_offset, a.coordinator_epoch) == (-1, 4)
        assert _describe_producers(conn, 9)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_delayed_read_committed_fetch_answers_with_the_aborted_transaction(
    broker: BrokerProcess,
) -> None:
    """Kafka's testDelayedFetchIncludesAbortedTransaction: a read_committed Fetch waiting in
    the purgatory is woken by the markers and returns the aborted list with the data."""
    with _connect(broker) as conn:
        produce_txn(conn, TOPIC, 0, [b"a"], producer_id=PID_A)
        produce_txn(conn, TOPIC, 0, [b"b"], producer_id=PID_B)
        with ThreadPoolExecutor(1) as pool, WireConnection(*broker.host_port) as waiting:
            pending = pool.submit(fetch, waiting, TOPIC, 0, 0, max_wait_ms=20_000, min_bytes=1)
            time.sleep(0.2)  # observation window: nothing is stable yet, the fetch waits
            assert not pending.done()
            write_markers(conn, [(TOPIC, 0)], producer_id=PID_A, commit=False)
            got = pending.result(10)
        assert got.records and got.aborted is not None
        assert (PID_A, 0) in got.aborted
        assert b"a" not in visible(got.records, got.aborted)
        write_markers(conn, [(TOPIC, 0)], producer_id=PID_B, commit=True)
        assert consume_committed(conn, TOPIC, 0) == ([b"b"], 4)
