"""The transaction state machine, case by case: the cases of Kafka's TransactionCoordinatorTest
and TransactionMetadataTest that apply to transaction version 0/1, adapted."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.server.txn.helpers import Allocator, applied
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.group.schema import OFFSETS_TOPIC, partition_for
from tierlog.server.txn.config import TxnCoordinatorConfig
from tierlog.server.txn.schema import decode_value, encode_value
from tierlog.server.txn.state import (
    EXHAUSTED_EPOCH,
    MAX_PRODUCER_EPOCH,
    VALID_PREVIOUS,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    abort_timed_out,
    add_offsets,
    add_partitions,
    check_transition,
    complete,
    end_txn,
    expire,
    init_producer_id,
    marker_written,
    timed_out,
    verify_partitions,
    write_failed,
    write_succeeded,
)

CONFIG = TxnCoordinatorConfig()
TID = "txn-1"
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
NOW = 1_000_000


def meta(state: TxnState, *, epoch: int = 3, pid: int = 10, **kw: object) -> TxnMetadata:
    parts = frozenset({TP0}) if state not in (TxnState.EMPTY, TxnState.DEAD) else frozenset()
    if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        parts = frozenset()
    base = TxnMetadata(
        transactional_id=TID,
        producer_id=pid,
        producer_epoch=epoch,
        timeout_ms=60_000,
        state=state,
        partitions=parts,
        start_ms=-1 if state is TxnState.EMPTY else NOW - 10,
        last_update_ms=NOW - 10,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def init(
    m: TxnMetadata | None, alloc: Allocator | None = None, timeout: int = 60_000, **kw: int
) -> tuple[ErrorCode, TxnMetadata | None, int, int]:
    d = init_producer_id(m, TID, timeout, NOW, alloc or Allocator(), CONFIG, **kw)
    if d.error is not ErrorCode.NONE and d.write is None:
        return d.error, d.current, d.producer_id, d.producer_epoch
    return d.error, applied(d), d.producer_id, d.producer_epoch


# --- the table of valid previous states -------------------------------------------------------


def test_valid_previous_states_are_kafkas() -> None:
    s = TxnState
    assert VALID_PREVIOUS[s.PREPARE_COMMIT] == {s.ONGOING}
    assert VALID_PREVIOUS[s.PREPARE_ABORT] == {s.ONGOING, s.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS[s.COMPLETE_COMMIT] == {s.PREPARE_COMMIT}
    assert VALID_PREVIOUS[s.COMPLETE_ABORT] == {s.PREPARE_ABORT}
    assert VALID_PREVIOUS[s.EMPTY] == {s.EMPTY, s.COMPLETE_COMMIT, s.COMPLETE_ABORT}
    assert VALID_PREVIOUS[s.DEAD] == {s.EMPTY, s.COMPLETE_COMMIT, s.COMPLETE_ABORT}
    assert [x.label for x in s] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]


def test_illegal_transitions_are_bugs() -> None:
    with pytest.raises(IllegalTransition):
        check_transition(meta(TxnState.EMPTY), meta(TxnState.PREPARE_COMMIT))
    with pytest.raises(IllegalTransition):
        check_transition(meta(TxnState.ONGOING), meta(TxnState.ONGOING, epoch=5))
    with pytest.raises(IllegalTransition):
        check_transition(
            meta(TxnState.ONGOING, partitions=frozenset({TP0, TP1})), meta(TxnState.ONGOING)
        )


# --- InitProducerId ---------------------------------------------------------------------------


def test_init_rejects_empty_id_and_bad_timeouts() -> None:
    d = init_producer_id(None, "", 1000, NOW, Allocator(), CONFIG)
    assert d.error is ErrorCode.INVALID_REQUEST
    for timeout in (0, -1, CONFIG.max_timeout_ms + 1):
        assert init(None, timeout=timeout)[0] is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert init(None, timeout=CONFIG.max_timeout_ms)[0] is ErrorCode.NONE


def test_init_new_id_gets_epoch_zero() -> None:
    alloc = Allocator()
    d = init_producer_id(None, TID, 5000, NOW, alloc, CONFIG)
    assert d.error is ErrorCode.NONE and d.write is not None
    assert (d.producer_id, d.producer_epoch) == (alloc.handed_out[0], 0)
    assert d.write.state is TxnState.EMPTY and d.write.timeout_ms == 5000
    assert d.current is not None and d.current.pending is TxnState.EMPTY
    assert d.current.producer_epoch == -1


def test_init_bumps_epoch_and_fences_the_previous_producer() -> None:
    for state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        error, m, pid, epoch = init(meta(state, epoch=3))
        assert (error, pid, epoch) == (ErrorCode.NONE, 10, 4)
        assert m is not None and m.state is TxnState.EMPTY and not m.partitions
        assert m.start_ms == -1 and m.last_producer_epoch == -1
        # The old producer is fenced everywhere.
        assert add_partitions(m, TID, 10, 3, [TP0], NOW).error is ErrorCode.PRODUCER_FENCED
        assert end_txn(m, TID, 10, 3, True, NOW).error is ErrorCode.PRODUCER_FENCED


def test_init_replaces_the_timeout() -> None:
    _, m, _, _ = init(meta(TxnState.EMPTY), timeout=1234)
    assert m is not None and m.timeout_ms == 1234


def test_init_while_pending_is_concurrent() -> None:
    m = meta(TxnState.EMPTY, pending=TxnState.ONGOING)
    assert init(m)[0] is ErrorCode.CONCURRENT_TRANSACTIONS


@pytest.mark.parametrize("state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT])
def test_init_while_preparing_is_concurrent(state: TxnState) -> None:
    assert init(meta(state))[0] is ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_during_ongoing_fences_and_aborts() -> None:
    m = meta(TxnState.ONGOING, epoch=3, partitions=frozenset({TP0, TP1}))
    d = init_producer_id(m, TID, 60_000, NOW, Allocator(), CONFIG)
    assert d.error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert (d.producer_id, d.producer_epoch) == (-1, -1)
    assert d.markers and d.write is not None
    assert d.write.state is TxnState.PREPARE_ABORT and d.write.producer_epoch == 4
    assert d.write.partitions == {TP0, TP1}
    assert d.current is not None and d.current.producer_epoch == 4
    aborting = applied(d)
    assert aborting.state is TxnState.PREPARE_ABORT
    # The retrying producer waits for the abort, then is bumped once more.
    assert init(aborting)[0] is ErrorCode.CONCURRENT_TRANSACTIONS
    for tp in (TP0, TP1):
        aborting = marker_written(aborting, tp)
    done = applied(complete(aborting, NOW))
    assert done.state is TxnState.COMPLETE_ABORT
    error, _, _, epoch = init(done)
    assert (error, epoch) == (ErrorCode.NONE, 5)


def test_failed_fence_does_not_bump_twice() -> None:
    m = meta(TxnState.ONGOING, epoch=3)
    d = init_producer_id(m, TID, 60_000, NOW, Allocator(), CONFIG)
    assert d.current is not None
    failed = write_failed(d.current)
    assert failed.state is TxnState.ONGOING and failed.pending is None
    assert failed.producer_epoch == 4 and failed.has_failed_epoch_fence
    again = init_producer_id(failed, TID, 60_000, NOW, Allocator(), CONFIG)
    assert again.write is not None and again.write.producer_epoch == 4
    assert applied(again).has_failed_epoch_fence is False


def test_fence_at_exhausted_epoch_uses_the_reserved_epoch() -> None:
    d = init_producer_id(
        meta(TxnState.ONGOING, epoch=EXHAUSTED_EPOCH), TID, 60_000, NOW, Allocator(), CONFIG
    )
    assert d.write is not None and d.write.producer_epoch == MAX_PRODUCER_EPOCH


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    alloc = Allocator()
    error, m, pid, epoch = init(meta(TxnState.COMPLETE_COMMIT, epoch=EXHAUSTED_EPOCH), alloc)
    assert (error, pid, epoch) == (ErrorCode.NONE, alloc.handed_out[0], 0)
    assert m is not None and m.prev_producer_id == 10 and m.last_producer_epoch == -1
    # A KIP-360 producer at the exhausted epoch: rotated, remembering its last epoch.
    alloc = Allocator()
    error, m, pid, epoch = init(
        meta(TxnState.EMPTY, epoch=MAX_PRODUCER_EPOCH),
        alloc,
        expected_producer_id=10,
        expected_epoch=MAX_PRODUCER_EPOCH,
    )
    assert (error, pid, epoch) == (ErrorCode.NONE, alloc.handed_out[0], 0)
    assert m is not None and m.last_producer_epoch == MAX_PRODUCER_EPOCH


def test_kip360_retry_after_rotation_is_answered() -> None:
    rotated = meta(
        TxnState.EMPTY, pid=20, epoch=0, prev_producer_id=10, last_producer_epoch=EXHAUSTED_EPOCH
    )
    error, _, pid, epoch = init(rotated, expected_producer_id=10, expected_epoch=EXHAUSTED_EPOCH)
    assert (error, pid, epoch) == (ErrorCode.NONE, 20, 0)


def test_kip360_bump_with_the_current_epoch() -> None:
    error, m, pid, epoch = init(
        meta(TxnState.COMPLETE_ABORT, epoch=3), expected_producer_id=10, expected_epoch=3
    )
    assert (error, pid, epoch) == (ErrorCode.NONE, 10, 4)
    assert m is not None and m.last_producer_epoch == 3
    # The same request again (its answer was lost): the current epoch, no new bump.
    error, _, pid, epoch = init(m, expected_producer_id=10, expected_epoch=3)
    assert (error, pid, epoch) == (ErrorCode.NONE, 10, 4)


def test_kip360_stale_producer_is_fenced() -> None:
    m = meta(TxnState.EMPTY, epoch=5, last_producer_epoch=4)
    assert init(m, expected_producer_id=10, expected_epoch=2)[0] is ErrorCode.PRODUCER_FENCED
    assert init(m, expected_producer_id=99, expected_epoch=5)[0] is ErrorCode.PRODUCER_FENCED


def test_kip360_unknown_id_gets_a_new_producer_id() -> None:
    alloc = Allocator()
    error, _, pid, epoch = init(None, alloc, expected_producer_id=77, expected_epoch=4)
    assert (error, pid, epoch) == (ErrorCode.NONE, alloc.handed_out[0], 0)


def test_init_after_expiration_starts_over() -> None:
    dead = meta(TxnState.DEAD)
    alloc = Allocator()
    error, _, pid, epoch = init(dead, alloc)
    assert (error, pid, epoch) == (ErrorCode.NONE, alloc.handed_out[0], 0)


# --- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------


def test_add_partitions_errors() -> None:
    assert add_partitions(None, "", 10, 3, [TP0], NOW).error is ErrorCode.INVALID_REQUEST
    assert (
        add_partitions(None, TID, 10, 3, [TP0], NOW).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    m = meta(TxnState.EMPTY)
    assert add_partitions(m, TID, 11, 3, [TP0], NOW).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(m, TID, 10, 2, [TP0], NOW).error is ErrorCode.PRODUCER_FENCED
    assert add_partitions(m, TID, 10, 4, [TP0], NOW).error is ErrorCode.PRODUCER_FENCED
    pending = replace(m, pending=TxnState.ONGOING)
    assert (
        add_partitions(pending, TID, 10, 3, [TP0], NOW).error is ErrorCode.CONCURRENT_TRANSACTIONS
    )
    for state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        d = add_partitions(meta(state), TID, 10, 3, [TP0], NOW)
        assert d.error is ErrorCode.CONCURRENT_TRANSACTIONS


@pytest.mark.parametrize(
    "state", [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT]
)
def test_add_partitions_starts_a_transaction(state: TxnState) -> None:
    d = add_partitions(meta(state), TID, 10, 3, [TP0, TP1], NOW)
    assert d.error is ErrorCode.NONE and d.write is not None
    m = applied(d)
    assert m.state is TxnState.ONGOING and m.partitions == {TP0, TP1} and m.start_ms == NOW


def test_add_partitions_grows_an_ongoing_transaction() -> None:
    m = meta(TxnState.ONGOING)
    grown = applied(add_partitions(m, TID, 10, 3, [TP1], NOW))
    assert grown.partitions == {TP0, TP1} and grown.start_ms == m.start_ms


def test_add_known_partitions_writes_nothing() -> None:
    d = add_partitions(meta(TxnState.ONGOING), TID, 10, 3, [TP0], NOW)
    assert d.error is ErrorCode.NONE and d.write is None


def test_add_offsets_adds_the_groups_partition() -> None:
    m = applied(add_offsets(meta(TxnState.EMPTY), TID, 10, 3, "group", NOW, CONFIG))
    assert m.partitions == {TopicPartition(OFFSETS_TOPIC, partition_for("group", 50))}


def test_verify_partitions() -> None:
    m = meta(TxnState.ONGOING)
    assert verify_partitions(m, TID, 10, 3, [TP0, TP1]) == {
        TP0: ErrorCode.NONE,
        TP1: ErrorCode.TRANSACTION_ABORTABLE,
    }
    assert verify_partitions(m, TID, 11, 3, [TP0]) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert verify_partitions(m, TID, 10, 2, [TP0]) is ErrorCode.PRODUCER_FENCED
    prep = meta(TxnState.PREPARE_COMMIT)
    assert verify_partitions(prep, TID, 10, 3, [TP0]) is ErrorCode.CONCURRENT_TRANSACTIONS
    assert verify_partitions(replace(m, pending=TxnState.PREPARE_COMMIT), TID, 10, 3, [TP0]) == {
        TP0: ErrorCode.NONE
    }


# --- EndTxn -----------------------------------------------------------------------------------


def test_end_txn_identity_errors() -> None:
    assert end_txn(None, "", 10, 3, True, NOW).error is ErrorCode.INVALID_REQUEST
    assert end_txn(None, TID, 10, 3, True, NOW).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    m = meta(TxnState.ONGOING)
    assert end_txn(m, TID, 11, 3, True, NOW).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert end_txn(m, TID, 10, 2, True, NOW).error is ErrorCode.PRODUCER_FENCED
    assert end_txn(m, TID, 10, 4, False, NOW).error is ErrorCode.PRODUCER_FENCED
    pending = replace(m, pending=TxnState.ONGOING)
    assert end_txn(pending, TID, 10, 3, True, NOW).error is ErrorCode.CONCURRENT_TRANSACTIONS


_N, _C, _I = ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.INVALID_TXN_STATE


@pytest.mark.parametrize(
    ("state", "commit", "error"),
    [
        (TxnState.PREPARE_COMMIT, True, _C),
        (TxnState.PREPARE_COMMIT, False, _I),
        (TxnState.PREPARE_ABORT, True, _I),
        (TxnState.PREPARE_ABORT, False, _C),
        (TxnState.COMPLETE_COMMIT, True, _N),
        (TxnState.COMPLETE_COMMIT, False, _I),
        (TxnState.COMPLETE_ABORT, True, _I),
        (TxnState.COMPLETE_ABORT, False, _N),
        (TxnState.EMPTY, True, _I),
        (TxnState.EMPTY, False, _I),
    ],
)
def test_end_txn_outside_ongoing(state: TxnState, commit: bool, error: ErrorCode) -> None:
    d = end_txn(meta(state), TID, 10, 3, commit, NOW)
    assert d.error is error and d.write is None


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_prepares_then_completes(commit: bool) -> None:
    m = meta(TxnState.ONGOING, partitions=frozenset({TP0, TP1}))
    d = end_txn(m, TID, 10, 3, commit, NOW)
    assert d.error is ErrorCode.NONE and d.markers and d.write is not None
    prepared = applied(d)
    assert prepared.state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    assert prepared.producer_epoch == 3 and prepared.partitions == {TP0, TP1}
    half = marker_written(prepared, TP0)
    assert half.partitions == {TP1}
    done = applied(complete(marker_written(half, TP1), NOW + 5))
    assert done.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert not done.partitions and done.start_ms == m.start_ms and done.last_update_ms == NOW + 5
    # The client's retry of the same EndTxn is answered without a write.
    again = end_txn(done, TID, 10, 3, commit, NOW)
    assert again.error is ErrorCode.NONE and again.write is None


def test_failed_prepare_write_leaves_the_transaction_ongoing() -> None:
    d = end_txn(meta(TxnState.ONGOING), TID, 10, 3, True, NOW)
    assert d.current is not None
    assert d.current.pending is TxnState.PREPARE_COMMIT
    assert (
        add_partitions(d.current, TID, 10, 3, [TP1], NOW).error is ErrorCode.CONCURRENT_TRANSACTIONS
    )
    back = write_failed(d.current)
    assert back.state is TxnState.ONGOING and back.pending is None


def test_write_succeeded_checks_the_pending_state() -> None:
    m = meta(TxnState.ONGOING)
    with pytest.raises(IllegalTransition):
        write_succeeded(m, replace(m, state=TxnState.PREPARE_COMMIT))


# --- timeouts and expiration ------------------------------------------------------------------


def test_timed_out_transaction_is_fenced_and_aborted() -> None:
    m = meta(TxnState.ONGOING, epoch=3, start_ms=NOW, timeout_ms=1000)
    assert not timed_out(m, NOW + 1000)
    assert abort_timed_out(m, NOW + 1000) is None
    d = abort_timed_out(m, NOW + 1001)
    assert d is not None and d.error is ErrorCode.NONE and d.markers
    assert d.write is not None
    assert d.write.state is TxnState.PREPARE_ABORT and d.write.producer_epoch == 4
    aborted = applied(d)
    # The zombie's next requests are refused.
    assert add_partitions(aborted, TID, 10, 3, [TP0], NOW).error is ErrorCode.PRODUCER_FENCED
    assert end_txn(aborted, TID, 10, 3, True, NOW).error is ErrorCode.PRODUCER_FENCED


def test_pending_transaction_is_not_timed_out() -> None:
    m = meta(TxnState.ONGOING, start_ms=0, timeout_ms=1, pending=TxnState.PREPARE_COMMIT)
    assert abort_timed_out(m, NOW) is None
    assert abort_timed_out(meta(TxnState.EMPTY, timeout_ms=1), NOW) is None


def test_failed_timeout_abort_does_not_bump_again() -> None:
    m = meta(TxnState.ONGOING, epoch=3, start_ms=0, timeout_ms=1)
    d = abort_timed_out(m, NOW)
    assert d is not None and d.current is not None
    failed = write_failed(d.current)
    d2 = abort_timed_out(failed, NOW)
    assert d2 is not None and d2.write is not None and d2.write.producer_epoch == 4


@pytest.mark.parametrize(
    "state", [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT]
)
def test_idle_ids_expire(state: TxnState) -> None:
    m = meta(state, last_update_ms=0)
    assert expire(m, CONFIG.id_expiration_ms - 1, CONFIG) is None
    d = expire(m, CONFIG.id_expiration_ms, CONFIG)
    assert d is not None and d.write is not None and d.write.state is TxnState.DEAD
    dead = applied(d)
    assert end_txn(dead, TID, 10, 3, True, NOW).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize(
    "state", [TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT]
)
def test_active_ids_do_not_expire(state: TxnState) -> None:
    assert expire(meta(state, last_update_ms=0), 10**13, CONFIG) is None


# --- the log value ----------------------------------------------------------------------------


def test_metadata_round_trips_through_the_log() -> None:
    m = meta(
        TxnState.ONGOING,
        partitions=frozenset({TP0, TP1, TopicPartition("u", 7)}),
        prev_producer_id=4,
        last_producer_epoch=2,
    )
    value = decode_value(encode_value(m.to_log_value()))
    assert value is not None
    assert value.partitions == (("t", (0, 1)), ("u", (7,)))
    loaded = TxnMetadata.from_log_value(TID, value)
    assert loaded == replace(m, last_producer_epoch=-1)
    with pytest.raises(IllegalTransition):
        TxnMetadata.from_log_value(TID, replace(value, state=TxnState.DEAD.value))


def test_failed_fence_at_the_reserved_epoch_can_be_retried() -> None:
    m = meta(TxnState.ONGOING, epoch=EXHAUSTED_EPOCH)
    d = init_producer_id(m, TID, 60_000, NOW, Allocator(), CONFIG)
    assert d.current is not None
    failed = write_failed(d.current)
    assert failed.producer_epoch == MAX_PRODUCER_EPOCH
    again = init_producer_id(failed, TID, 60_000, NOW, Allocator(), CONFIG)
    assert again.write is not None and again.write.producer_epoch == MAX_PRODUCER_EPOCH
    aborting = applied(again)
    done = applied(complete(marker_written(aborting, TP0), NOW))
    alloc = Allocator()
    error, _, pid, epoch = init(done, alloc)
    assert (error, pid, epoch) == (ErrorCode.NONE, alloc.handed_out[0], 0)


def test_kip360_without_last_producer_data_is_fenced() -> None:
    """Metadata written without the previous producer (an old writer, or a reload: the last
    epoch is not persisted) cannot recognise a retry."""
    m = meta(TxnState.EMPTY, epoch=2)
    assert init(m, expected_producer_id=10, expected_epoch=1)[0] is ErrorCode.PRODUCER_FENCED


def test_kip360_old_producer_id_after_a_new_mapping_is_fenced() -> None:
    m = meta(TxnState.EMPTY, pid=11, epoch=1, prev_producer_id=10, last_producer_epoch=0)
    assert init(m, expected_producer_id=10, expected_epoch=1)[0] is ErrorCode.PRODUCER_FENCED


def test_kip360_retry_of_a_rotation_returns_the_new_producer_id() -> None:
    m = meta(TxnState.EMPTY, epoch=EXHAUSTED_EPOCH, last_producer_epoch=EXHAUSTED_EPOCH - 1)
    alloc = Allocator()
    error, rotated, pid, epoch = init(
        m, alloc, expected_producer_id=10, expected_epoch=EXHAUSTED_EPOCH
    )
    assert (error, pid, epoch) == (ErrorCode.NONE, alloc.handed_out[0], 0)
    error, _, pid2, epoch2 = init(
        rotated, alloc, expected_producer_id=10, expected_epoch=EXHAUSTED_EPOCH
    )
    assert (error, pid2, epoch2) == (ErrorCode.NONE, pid, 0)
    assert len(alloc.handed_out) == 1
    # An old-producer-id request with any other epoch is fenced.
    assert init(rotated, alloc, expected_producer_id=10, expected_epoch=3)[0] is (
        ErrorCode.PRODUCER_FENCED
    )
