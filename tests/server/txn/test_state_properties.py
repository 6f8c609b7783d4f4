"""Random operation sequences against the transaction state machine: no sequence reaches a state
Kafka's rules forbid, and a transactional id's (producer id, epoch) never goes backwards.

Requests carry only (producer id, epoch) pairs the coordinator handed out, as real clients do;
the driver acknowledges or fails each write at a random later point, and sends markers only for
a transaction in Prepare*, as the coordinator's driver will.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.server.txn.helpers import Allocator
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.txn.config import TxnCoordinatorConfig
from tierlog.server.txn.state import (
    MAX_PRODUCER_EPOCH,
    Decision,
    TxnMetadata,
    TxnState,
    abort_timed_out,
    add_offsets,
    add_partitions,
    complete,
    end_txn,
    expire,
    init_producer_id,
    marker_written,
    verify_partitions,
    write_failed,
    write_succeeded,
)

CONFIG = TxnCoordinatorConfig(max_timeout_ms=10_000, id_expiration_ms=50_000)
TID = "tid"
PARTITIONS = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
_PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_ALLOWED_ERRORS = {
    ErrorCode.NONE,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.PRODUCER_FENCED,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.INVALID_TXN_STATE,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT,
}


@dataclass
class Driver:
    meta: TxnMetadata | None
    now: int = 0
    alloc: Allocator = field(default_factory=Allocator)
    in_flight: TxnMetadata | None = None
    handed_out: list[tuple[int, int]] = field(default_factory=list)
    highest: tuple[int, int] = (-1, -1)

    def take(self, d: Decision) -> None:
        assert d.error in _ALLOWED_ERRORS, d.error
        if d.write is not None:
            assert self.in_flight is None, "two writes in flight for one id"
            self.in_flight = d.write
        elif d.error is not ErrorCode.NONE:
            assert d.current == self.meta or self.meta is None or self.meta.state is TxnState.DEAD
        self.meta = d.current
        if d.producer_epoch >= 0 and d.write is None:
            self.handed_out.append((d.producer_id, d.producer_epoch))

    def ack(self) -> None:
        assert self.meta is not None and self.in_flight is not None
        written, self.in_flight = self.in_flight, None
        self.meta = write_succeeded(self.meta, written)
        if written.state is TxnState.EMPTY:
            self.handed_out.append((written.producer_id, written.producer_epoch))
        if written.state is TxnState.DEAD:
            self.meta = None

    def fail(self) -> None:
        assert self.meta is not None and self.in_flight is not None
        self.in_flight = None
        self.meta = write_failed(self.meta)

    def check(self) -> None:
        m = self.meta
        if m is None:
            return
        pair = (m.producer_id, m.producer_epoch)
        assert pair >= self.highest, f"{pair} went back from {self.highest}"
        self.highest = pair
        assert -1 <= m.producer_epoch <= MAX_PRODUCER_EPOCH
        assert (m.pending is None) == (self.in_flight is None)
        assert m.state not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)
        if m.state is TxnState.EMPTY:
            assert not m.partitions and m.start_ms == -1
        if m.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            assert not m.partitions
        if m.state is TxnState.ONGOING:
            assert m.partitions and m.start_ms >= 0


_op = st.one_of(
    st.tuples(st.just("init"), st.integers(-1, 12_000), st.integers(-2, 5), st.booleans()),
    st.tuples(st.just("add"), st.sets(st.sampled_from(PARTITIONS), min_size=1), st.integers(0, 5)),
    st.tuples(st.just("offsets"), st.integers(0, 5)),
    st.tuples(st.just("end"), st.booleans(), st.integers(0, 5)),
    st.tuples(st.just("verify"), st.integers(0, 5)),
    st.just(("marker",)),
    st.just(("complete",)),
    st.tuples(st.just("tick"), st.integers(0, 60_000)),
    st.just(("ack",)),
    st.just(("fail",)),
)


#: What happens to a write in flight right after the operation: most writes succeed at once.
_settle = st.sampled_from(["ack", "ack", "ack", "fail", "later"])


def _pair(driver: Driver, back: int) -> tuple[int, int]:
    if not driver.handed_out:
        return (driver.meta.producer_id if driver.meta else 1, 0)
    return driver.handed_out[-1 - min(back, len(driver.handed_out) - 1)]


def step(driver: Driver, op: tuple[object, ...]) -> None:
    m = driver.meta
    name = op[0]
    if name == "ack" and driver.in_flight is not None:
        driver.ack()
    elif name == "fail" and driver.in_flight is not None:
        driver.fail()
    elif name == "init":
        timeout, back, kip360 = op[1], op[2], op[3]
        assert isinstance(timeout, int) and isinstance(back, int)
        pid, epoch = _pair(driver, back) if kip360 and back >= 0 else (-1, -1)
        driver.take(
            init_producer_id(
                m,
                TID,
                timeout,
                driver.now,
                driver.alloc,
                CONFIG,
                expected_producer_id=pid,
                expected_epoch=epoch,
            )
        )
    elif name == "add":
        parts, back = op[1], op[2]
        assert isinstance(parts, set) and isinstance(back, int)
        pid, epoch = _pair(driver, back)
        driver.take(add_partitions(m, TID, pid, epoch, parts, driver.now))
    elif name == "offsets":
        assert isinstance(op[1], int)
        pid, epoch = _pair(driver, op[1])
        driver.take(add_offsets(m, TID, pid, epoch, "g", driver.now, CONFIG))
    elif name == "end":
        commit, back = op[1], op[2]
        assert isinstance(commit, bool) and isinstance(back, int)
        pid, epoch = _pair(driver, back)
        driver.take(end_txn(m, TID, pid, epoch, commit, driver.now))
    elif name == "verify":
        assert isinstance(op[1], int)
        pid, epoch = _pair(driver, op[1])
        verify_partitions(m, TID, pid, epoch, PARTITIONS)
    elif name == "marker" and m is not None and m.state in _PREPARE and m.partitions:
        driver.meta = marker_written(m, min(m.partitions))
    elif name == "complete" and m is not None and m.state in _PREPARE and not m.partitions:
        driver.take(complete(m, driver.now))
    elif name == "tick":
        assert isinstance(op[1], int)
        driver.now += op[1]
        if m is not None and driver.in_flight is None:
            timed_out = abort_timed_out(m, driver.now)
            if timed_out is not None:
                driver.take(timed_out)
            else:
                expired = expire(m, driver.now, CONFIG)
                if expired is not None:
                    driver.take(expired)
    driver.check()


@settings(max_examples=300)
@given(
    st.sampled_from([None, 0, 5, 32_764, 32_765, 32_766]),
    st.sampled_from([TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT]),
    st.lists(st.tuples(_op, _settle), max_size=60),
)
def test_random_sequences_keep_kafkas_rules(
    start_epoch: int | None,
    start_state: TxnState,
    ops: list[tuple[tuple[object, ...], str]],
) -> None:
    meta = None
    if start_epoch is not None:
        meta = TxnMetadata(
            transactional_id=TID,
            producer_id=1,
            producer_epoch=start_epoch,
            timeout_ms=1000,
            state=start_state,
            last_update_ms=0,
        )
    driver = Driver(meta)
    if meta is not None:
        driver.handed_out.append((1, start_epoch or 0))
    driver.check()
    for op, settle in ops:
        step(driver, op)
        if settle != "later":
            step(driver, (settle,))


def test_epoch_exhaustion_round_trip() -> None:
    """A producer id driven to the end of its epochs moves on to a fresh one."""
    driver = Driver(None)
    driver.take(init_producer_id(None, TID, 1000, 0, driver.alloc, CONFIG))
    driver.ack()
    assert driver.meta is not None
    driver.meta = TxnMetadata(
        transactional_id=TID,
        producer_id=driver.meta.producer_id,
        producer_epoch=32_765,
        timeout_ms=1000,
        state=TxnState.EMPTY,
    )
    seen = []
    for _ in range(3):
        d = init_producer_id(driver.meta, TID, 1000, 0, driver.alloc, CONFIG)
        driver.take(d)
        driver.ack()
        seen.append((d.producer_id, d.producer_epoch))
    first = seen[0][0]
    assert seen == [
        (first, 32_766),
        (driver.alloc.handed_out[-1], 0),
        (driver.alloc.handed_out[-1], 1),
    ]
