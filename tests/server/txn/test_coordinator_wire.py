"""The coordinator APIs over the wire against a real ``tierlog serve``: InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (markers over the wire to the
broker itself), DescribeTransactions/ListTransactions, fencing on old and new versions, and the
state surviving a kill -9."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.txn_wire import produce_txn
from tests.helpers.wire import recv_frame
from tierlog.client import WireConnection, parse_bootstrap
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_request, request_schema
from tierlog.protocol.errors import ErrorCode


def _init(
    conn: WireConnection, tid: str, version: int = 4, timeout_ms: int = 60_000, **kw: Any
) -> tuple[int, int, int]:
    r = conn.call(
        ApiKey.INIT_PRODUCER_ID,
        version,
        transactional_id=tid,
        transaction_timeout=timeout_ms,
        producer_id=kw.get("producer_id", -1),
        producer_epoch=kw.get("producer_epoch", -1),
    )
    return int(r.error_code), int(r.producer_id), int(r.producer_epoch)


def _init_ok(conn: WireConnection, tid: str, **kw: Any) -> tuple[int, int]:
    """InitProducerId, retried while the coordinator answers CONCURRENT_TRANSACTIONS."""
    out: list[tuple[int, int]] = []

    def done() -> bool:
        code, pid, epoch = _init(conn, tid, **kw)
        assert code in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS), code
        if code == ErrorCode.NONE:
            out.append((pid, epoch))
        return code == ErrorCode.NONE

    wait_until(done, timeout_s=20, what=f"InitProducerId({tid})")
    return out[-1]


def _add(
    conn: WireConnection, tid: str, pid: int, epoch: int, topic: str, parts: list[int], v: int = 3
) -> list[int]:
    r = conn.call(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        v,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": topic, "partitions": parts}],
    )
    return [
        int(p.partition_error_code)
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]


def _end(conn: WireConnection, tid: str, pid: int, epoch: int, commit: bool, v: int = 3) -> int:
    r = conn.call(
        ApiKey.END_TXN,
        v,
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )
    return int(r.error_code)


@dataclass(frozen=True)
class Described:
    error_code: int
    transaction_state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    topics: list[tuple[str, list[int]]]


class _Reader:
    """DescribeTransactions v0 read by hand: kio refuses the -1 start time Kafka sends for a
    transaction that has not started."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _describe(broker: BrokerProcess, tid: str) -> Described:
    cls = request_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0)
    assert cls is not None
    request = encode_request(
        ApiKey.DESCRIBE_TRANSACTIONS, 0, 1, "test", mk(cls, transactional_ids=[tid])
    )
    with socket.create_connection(parse_bootstrap(broker.bootstrap)[0], timeout=10) as sock:
        sock.sendall(request)
        r = _Reader(recv_frame(sock))
    r.take(">i")
    r.skip_tags()
    r.take(">i")
    assert r.uvarint() == 2
    error = r.take(">h")
    assert r.string() == tid
    state = r.string()
    timeout_ms, start_ms = r.take(">i"), r.take(">q")
    pid, epoch = r.take(">q"), r.take(">h")
    topics = []
    for _ in range(r.uvarint() - 1):
        name = r.string()
        parts = [r.take(">i") for _ in range(r.uvarint() - 1)]
        r.skip_tags()
        topics.append((name, parts))
    return Described(error, state, timeout_ms, start_ms, pid, epoch, topics)


def _state_is(broker: BrokerProcess, tid: str, label: str) -> Callable[[], bool]:
    return lambda: _describe(broker, tid).transaction_state == label


def _connect(broker: BrokerProcess) -> WireConnection:
    return WireConnection.to_bootstrap(broker.bootstrap)


def test_commit_and_abort_walk_the_state_machine(broker: BrokerProcess) -> None:
    with _connect(broker) as conn:
        assert conn.create_topic("t", 2)[0] == 0
        pid, epoch = _init_ok(conn, "txn-a")
        assert epoch == 0
        assert _describe(broker, "txn-a").transaction_state == "Empty"
        assert _add(conn, "txn-a", pid, epoch, "t", [0, 1]) == [0, 0]
        d = _describe(broker, "txn-a")
        assert d.transaction_state == "Ongoing"
        assert d.topics == [("t", [0, 1])]
        assert _end(conn, "txn-a", pid, epoch, commit=True) == 0
        wait_until(_state_is(broker, "txn-a", "CompleteCommit"), timeout_s=20, what="commit")
        # a repeated EndTxn(commit) of a completed commit is NONE, an abort of it is not
        assert _end(conn, "txn-a", pid, epoch, commit=True) == 0
        assert _end(conn, "txn-a", pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        assert _add(conn, "txn-a", pid, epoch, "t", [1]) == [0]
        assert _end(conn, "txn-a", pid, epoch, commit=False) == 0
        wait_until(_state_is(broker, "txn-a", "CompleteAbort"), timeout_s=20, what="abort")
        listed = conn.call(ApiKey.LIST_TRANSACTIONS, 1, state_filters=["CompleteAbort", "Nope"])
        assert [t.transactional_id for t in listed.transaction_states] == ["txn-a"]
        assert list(listed.unknown_state_filters) == ["Nope"]


def test_errors_and_fencing(broker: BrokerProcess) -> None:
    with _connect(broker) as conn:
        assert conn.create_topic("t", 1)[0] == 0
        assert _init(conn, "", 4)[0] == ErrorCode.INVALID_REQUEST
        assert _init(conn, "x", 4, timeout_ms=10**9)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        pid, e0 = _init_ok(conn, "txn-f")
        pid2, e1 = _init_ok(conn, "txn-f")
        assert (pid2, e1) == (pid, e0 + 1)
        # the zombie at the old epoch is fenced: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH
        # below it
        assert _add(conn, "txn-f", pid, e0, "t", [0], v=2) == [ErrorCode.PRODUCER_FENCED]
        assert _add(conn, "txn-f", pid, e0, "t", [0], v=1) == [ErrorCode.INVALID_PRODUCER_EPOCH]
        assert _add(conn, "txn-f", pid + 1, e1, "t", [0]) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING]
        assert _add(conn, "txn-f", pid, e1, "nope", [0]) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert _end(conn, "txn-f", pid, e1, commit=True) == ErrorCode.INVALID_TXN_STATE
        # InitProducerId on an ongoing transaction aborts it and answers CONCURRENT_TRANSACTIONS
        assert _add(conn, "txn-f", pid, e1, "t", [0]) == [0]
        assert _init(conn, "txn-f", 4)[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        assert _end(conn, "txn-f", pid, e1, commit=True) in (
            ErrorCode.PRODUCER_FENCED,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        )
        pid3, e3 = _init_ok(conn, "txn-f")
        assert (pid3, e3) == (pid, e1 + 2)
        assert _describe(broker, "txn-f").transaction_state == "Empty"
        unknown = _describe(broker, "never-seen")
        assert unknown.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        # an error answer carries nothing else: every field at its schema default, as
        # Kafka's (a -1 start time is a timestamp some clients refuse to decode)
        assert (unknown.start_ms, unknown.producer_id, unknown.producer_epoch) == (0, 0, 0)


def test_timed_out_transaction_is_aborted(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    with _connect(broker) as conn:
        assert conn.create_topic("t", 1)[0] == 0
        pid, epoch = _init_ok(conn, "txn-t", timeout_ms=500)
        assert _add(conn, "txn-t", pid, epoch, "t", [0]) == [0]
        wait_until(_state_is(broker, "txn-t", "CompleteAbort"), timeout_s=20, what="timeout abort")
        assert _describe(broker, "txn-t").producer_epoch == epoch + 1
        assert _end(conn, "txn-t", pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED


def test_state_survives_kill_and_prepared_commit_completes(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    with _connect(broker) as conn:
        assert conn.create_topic("t", 1)[0] == 0
        pid, epoch = _init_ok(conn, "txn-k")
        assert _add(conn, "txn-k", pid, epoch, "t", [0]) == [0]
    broker.restart(kill=True)
    with _connect(broker) as conn:
        d = _describe(broker, "txn-k")
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
        assert _end(conn, "txn-k", pid, epoch, commit=True) == 0
        wait_until(_state_is(broker, "txn-k", "CompleteCommit"), timeout_s=20, what="commit")
    broker.restart(kill=True)
    with _connect(broker) as conn:
        assert _describe(broker, "txn-k").transaction_state == "CompleteCommit"
        pid2, epoch2 = _init_ok(conn, "txn-k")
        assert (pid2, epoch2) == (pid, epoch + 1)


def _producers(conn: WireConnection, topic: str, partition: int) -> list[Any]:
    r = conn.call(
        ApiKey.DESCRIBE_PRODUCERS, 0, topics=[{"name": topic, "partition_indexes": [partition]}]
    )
    p = r.topics[0].partitions[0]
    assert p.error_code == 0
    return list(p.active_producers)


def test_describe_producers_shows_the_open_transaction(broker: BrokerProcess) -> None:
    with _connect(broker) as conn:
        assert conn.create_topic("t", 1)[0] == 0
        pid, epoch = _init_ok(conn, "txn-p")
        assert _add(conn, "txn-p", pid, epoch, "t", [0]) == [0]
        code, base = produce_txn(
            conn, "t", 0, [b"a", b"b"], producer_id=pid, epoch=epoch, transactional_id="txn-p"
        )
        assert (code, base) == (0, 0)
        (p,) = _producers(conn, "t", 0)
        assert (p.producer_id, p.producer_epoch, p.last_sequence) == (pid, epoch, 1)
        assert p.current_txn_start_offset == 0
        assert _end(conn, "txn-p", pid, epoch, commit=True) == 0
        wait_until(
            lambda: _producers(conn, "t", 0)[0].current_txn_start_offset == -1,
            timeout_s=20,
            what="the commit marker",
        )
        assert _producers(conn, "t", 0)[0].coordinator_epoch == 0


def test_serve_debug_logs_every_coordinator_transition(
    broker_factory: Callable[..., BrokerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tierlog serve --debug <logger>`` (here through ``TIERLOG_TEST_DEBUG``) logs that
    logger at debug: the coordinator's transitions and refusals, and nothing at debug else."""
    monkeypatch.setenv("TIERLOG_TEST_DEBUG", "tierlog.server.txn.coordinator.transitions")
    broker = broker_factory()
    with _connect(broker) as conn:
        assert conn.create_topic("t", 1)[0] == 0
        pid, epoch = _init_ok(conn, "txn-d")
        assert _add(conn, "txn-d", pid, epoch, "t", [0]) == [0]
        assert _init(conn, "txn-d", 4)[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    log = wait_until(
        lambda: broker.stderr if "-> PrepareAbort" in broker.stderr else None,
        timeout_s=20,
        what="the fence's transition in the log",
    )
    assert f"'txn-d': Empty -> Ongoing, producer {pid} epoch {epoch}" in log
    assert "'txn-d': Ongoing -> PrepareAbort" in log
    debug_loggers = {line.split()[3] for line in log.splitlines() if " DEBUG " in line}
    assert debug_loggers == {"tierlog.server.txn.coordinator.transitions:"}
