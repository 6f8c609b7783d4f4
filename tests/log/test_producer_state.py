"""Idempotent producers: duplicates, sequence gaps, fencing, state across restarts."""

from __future__ import annotations

import pytest

from tests.log.log_helpers import TP, ManagerFactory, batch, new_log
from tierlog.log import LogAppendError
from tierlog.protocol.errors import ErrorCode

PID = 4242


def test_duplicate_batch_returns_original_offsets_without_appending(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(2), leader_epoch=0)
    first = part.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), leader_epoch=0)
    part.append_as_leader(batch(1, pid=PID, epoch=0, seq=3), leader_epoch=0)
    retry = part.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), leader_epoch=0)
    assert retry.duplicate
    assert (
        (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset) == (2, 4)
    )
    assert part.log_end_offset == 6


def test_only_the_last_five_batches_are_deduplicated(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    for seq in range(6):
        part.append_as_leader(batch(1, pid=PID, epoch=0, seq=seq), leader_epoch=0)
    assert part.append_as_leader(batch(1, pid=PID, epoch=0, seq=1), leader_epoch=0).duplicate
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, pid=PID, epoch=0, seq=0), leader_epoch=0)
    assert info.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_gap_is_out_of_order_and_appends_nothing(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(2, pid=PID, epoch=0, seq=0), leader_epoch=0)
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, pid=PID, epoch=0, seq=5), leader_epoch=0)
    assert info.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert part.log_end_offset == 2
    assert part.append_as_leader(batch(1, pid=PID, epoch=0, seq=2), leader_epoch=0).base_offset == 2


def test_older_epoch_is_fenced(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(1, pid=PID, epoch=3, seq=0), leader_epoch=0)
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, pid=PID, epoch=2, seq=1), leader_epoch=0)
    assert info.value.code is ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_restart_at_sequence_zero(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(1, pid=PID, epoch=0, seq=0), leader_epoch=0)
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, pid=PID, epoch=1, seq=7), leader_epoch=0)
    assert info.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert part.append_as_leader(batch(1, pid=PID, epoch=1, seq=0), leader_epoch=0).base_offset == 1


def test_unknown_producer_may_start_at_any_sequence(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    assert (
        part.append_as_leader(batch(1, pid=PID, epoch=0, seq=99), leader_epoch=0).base_offset == 0
    )


def test_duplicate_detected_after_clean_restart_via_snapshot(make_manager: ManagerFactory) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    part.append_as_leader(batch(2, pid=PID, epoch=1, seq=0), leader_epoch=0)
    last = part.append_as_leader(batch(2, pid=PID, epoch=1, seq=2), leader_epoch=0)
    mgr.shutdown()
    assert (part.dir / "00000000000000000004.snapshot").exists()
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    retry = part2.append_as_leader(batch(2, pid=PID, epoch=1, seq=2), leader_epoch=0)
    assert retry.duplicate and retry.base_offset == last.base_offset == 2
    with pytest.raises(LogAppendError) as info:
        part2.append_as_leader(batch(1, pid=PID, epoch=1, seq=9), leader_epoch=0)
    assert info.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_clean_shutdown_rewrites_no_snapshot_it_already_has(
    make_manager: ManagerFactory,
) -> None:
    """Kafka's ``takeSnapshot`` skips an offset it has a snapshot for, and an empty log
    needs none: a restart that wrote nothing leaves the snapshot file as it was."""
    mgr = make_manager()
    empty = new_log(mgr)
    mgr.shutdown()
    assert list(empty.dir.glob("*.snapshot")) == []
    mgr = make_manager()
    part = mgr.get_log(TP)
    assert part is not None
    part.append_as_leader(batch(2, pid=PID, epoch=1, seq=0), leader_epoch=0)
    mgr.shutdown()
    snapshot = part.dir / "00000000000000000002.snapshot"
    written = snapshot.stat()
    mgr = make_manager()
    assert mgr.get_log(TP) is not None
    mgr.shutdown()
    again = snapshot.stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    assert part2.append_as_leader(batch(2, pid=PID, epoch=1, seq=0), leader_epoch=0).duplicate


def test_state_rebuilt_from_log_after_crash_without_snapshot(make_manager: ManagerFactory) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    part.append_as_leader(batch(2, pid=PID, epoch=1, seq=0), leader_epoch=0)
    part.append_as_leader(batch(2, pid=PID, epoch=1, seq=2), leader_epoch=0)
    for p in mgr.all_logs():
        p.close(clean=False)
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    assert part2.append_as_leader(batch(2, pid=PID, epoch=1, seq=2), leader_epoch=0).duplicate
    assert (
        part2.append_as_leader(batch(1, pid=PID, epoch=1, seq=4), leader_epoch=0).base_offset == 4
    )


def test_a_retry_after_delete_records_past_the_batch_is_still_a_duplicate(
    make_manager: ManagerFactory,
) -> None:
    """The response to seq 0-2 is lost, then DeleteRecords (a Streams purge) moves the log
    start past it: the producer's retry must not be appended again (KIP-360)."""
    part = new_log(make_manager())
    first = part.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), leader_epoch=0)
    part.delete_records(3)
    retry = part.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), leader_epoch=0)
    assert retry.duplicate and retry.base_offset == first.base_offset == 0
    assert part.log_end_offset == 3
    # and the producer continues where it was
    assert part.append_as_leader(batch(1, pid=PID, epoch=0, seq=3), leader_epoch=0).base_offset == 3
