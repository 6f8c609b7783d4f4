"""Transactions in one partition's log: transactional batches, markers, the LSO, the
``.txnindex`` and the producer state that carries open transactions across restarts
(Kafka's ProducerStateManagerTest and UnifiedLog transaction cases, adapted)."""

from __future__ import annotations

import struct

import pytest

from tests.log.log_helpers import TOPIC_ID, TP, ManagerFactory, batch, new_log
from tierlog.log import LogAppendError, PartitionLog, TopicPartition, dump_file
from tierlog.log.txn_index import AbortedTxn, read_aborted_txns
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.protocol.txn_markers import ControlRecordType, marker_of_batch

PID, OTHER = 1000, 2000


def txn(part: PartitionLog, n: int, *, pid: int = PID, epoch: int = 0, seq: int = 0) -> int:
    """Append a transactional batch of ``n`` records; returns its base offset."""
    data = batch(n, pid=pid, epoch=epoch, seq=seq, transactional=True)
    return part.append_as_leader(data, leader_epoch=0).base_offset


def end(
    part: PartitionLog, *, commit: bool, pid: int = PID, epoch: int = 0, coordinator: int = 0
) -> int:
    return part.append_txn_marker(
        pid, epoch, coordinator, committed=commit, leader_epoch=0
    ).base_offset


def test_a_transaction_holds_the_lso_at_its_first_offset_until_its_marker(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(2), leader_epoch=0)
    first = txn(part, 3)
    assert first == 2
    assert part.high_watermark == 5
    assert part.last_stable_offset == 2
    txn(part, 1, seq=3)
    assert part.last_stable_offset == 2
    marker = end(part, commit=True)
    assert marker == 6
    assert part.last_stable_offset == part.high_watermark == 7


def test_the_marker_is_kafkas_control_batch(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    txn(part, 1)
    part.append_txn_marker(PID, 0, 7, committed=False, leader_epoch=3)
    data = part.read(1, 1 << 20).to_bytes()
    (h,) = scan_batches(data)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (PID, 0, -1)
    assert h.partition_leader_epoch == 3
    assert len(data) == 78
    (rec,) = iter_records(data, h)
    assert rec.key == struct.pack(">hh", 0, 0)
    assert rec.value == struct.pack(">hi", 0, 7)
    marker = marker_of_batch(data, h)
    assert marker is not None
    assert marker.type is ControlRecordType.ABORT
    assert marker.coordinator_epoch == 7


def test_read_committed_stops_at_the_lso(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(2), leader_epoch=0)
    txn(part, 3)
    part.append_as_leader(batch(1, tag=5), leader_epoch=0)
    committed = part.read(0, 1 << 20, upper_bound="lso").to_bytes()
    assert [h.last_offset for h in scan_batches(committed)] == [1]
    assert part.read(2, 1 << 20, upper_bound="lso").size == 0
    uncommitted = part.read(0, 1 << 20, upper_bound="hw").to_bytes()
    assert [h.last_offset for h in scan_batches(uncommitted)] == [1, 4, 5]
    end(part, commit=False)
    after = part.read(0, 1 << 20, upper_bound="lso").to_bytes()
    assert [h.last_offset for h in scan_batches(after)] == [1, 4, 5, 6]


def test_an_abort_is_indexed_with_kafkas_bytes_and_the_lso_of_other_producers(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    txn(part, 2)  # 0-1, PID
    txn(part, 1, pid=OTHER)  # 2, OTHER still open at PID's abort
    abort_at = end(part, commit=False)  # 3
    other_abort = end(part, commit=False, pid=OTHER)  # 4
    path = part.segments()[-1].txn_index_path
    raw = path.read_bytes()
    assert raw[:34] == struct.pack(">hqqqq", 0, PID, 0, abort_at, 2)
    assert list(read_aborted_txns(path)) == [
        AbortedTxn(PID, 0, 3, 2),
        AbortedTxn(OTHER, 2, other_abort, other_abort + 1),
    ]
    assert part.last_stable_offset == 5


def test_commits_and_empty_markers_are_not_indexed(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    txn(part, 1)
    end(part, commit=True)
    end(part, commit=False)  # nothing open: no index entry, no LSO change
    assert list(read_aborted_txns(part.segments()[-1].txn_index_path)) == []
    assert part.last_stable_offset == part.log_end_offset == 3


def test_non_transactional_batch_inside_an_open_transaction_is_refused(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    txn(part, 1)
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, pid=PID, epoch=0, seq=1), leader_epoch=0)
    assert info.value.code is ErrorCode.INVALID_TXN_STATE
    assert part.log_end_offset == 1


def test_markers_are_fenced_by_producer_and_coordinator_epochs(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    txn(part, 1, epoch=2)
    with pytest.raises(LogAppendError) as info:
        end(part, commit=True, epoch=1)
    assert info.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    end(part, commit=True, epoch=2, coordinator=5)
    txn(part, 1, epoch=2, seq=1)
    with pytest.raises(LogAppendError) as info:
        end(part, commit=False, epoch=2, coordinator=4)
    assert info.value.code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert part.log_end_offset == 3
    assert part.last_stable_offset == 2


def test_a_marker_with_a_new_epoch_restarts_sequences(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    txn(part, 1, epoch=0, seq=0)
    end(part, commit=False, epoch=1)  # fencing abort at a bumped epoch
    with pytest.raises(LogAppendError) as info:
        txn(part, 1, epoch=1, seq=1)
    assert info.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert txn(part, 1, epoch=1, seq=0) == 2


def test_transaction_version_2_markers_need_a_bumped_epoch(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    txn(part, 1, epoch=3)
    with pytest.raises(LogAppendError) as info:
        part.append_txn_marker(PID, 3, 0, committed=True, leader_epoch=0, strict_epoch=True)
    assert info.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    part.append_txn_marker(PID, 4, 0, committed=True, leader_epoch=0, strict_epoch=True)
    part.append_txn_marker(PID, 4, 0, committed=True, leader_epoch=0, strict_epoch=True)


def test_aborted_transactions_are_collected_across_segments(
    make_manager: ManagerFactory,
) -> None:
    """An abort whose marker lands in a later segment than its data is found from the
    data's segment: the search goes on until an entry's LSO passes the upper bound."""
    part = new_log(make_manager())
    txn(part, 2)  # 0-1
    part.roll()
    part.append_as_leader(batch(1), leader_epoch=0)  # 2
    part.roll()
    end(part, commit=False)  # 3, in the third segment
    got, complete = part.collect_aborted_txns(0, 2)
    assert got == [AbortedTxn(PID, 0, 3, 4)]
    assert complete
    assert part.collect_aborted_txns(4, 5) == ([], False)


def test_open_transactions_survive_a_clean_restart(make_manager: ManagerFactory) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    part.append_as_leader(batch(1), leader_epoch=0)
    txn(part, 2)
    part.roll()
    txn(part, 1, pid=OTHER)
    mgr.shutdown()
    again = make_manager().get_log(TP)
    assert again is not None
    assert again.last_stable_offset == 1
    again.append_txn_marker(PID, 0, 0, committed=False, leader_epoch=0)
    assert again.last_stable_offset == 3
    assert list(read_aborted_txns(again.segments()[-1].txn_index_path)) == [
        AbortedTxn(PID, 1, 4, 3)
    ]


def test_unclean_recovery_rebuilds_the_txn_index_and_open_transactions(
    make_manager: ManagerFactory,
) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    txn(part, 2)  # 0-1
    part.roll()
    txn(part, 1, pid=OTHER)  # 2
    end(part, commit=False)  # 3: PID aborted while OTHER is open
    index = part.segments()[-1].txn_index_path
    before = index.read_bytes()
    for p in mgr.all_logs():
        p.close(clean=False)
    index.unlink()
    again = make_manager().get_log(TP)
    assert again is not None
    assert index.read_bytes() == before
    assert again.last_stable_offset == 2
    assert again.collect_aborted_txns(0, 4)[0] == [AbortedTxn(PID, 0, 3, 2)]


def test_snapshot_keeps_the_current_transaction_first_offset(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    txn(part, 1)
    txn(part, 2, seq=1)
    part.roll()
    entries = part.producer_state.producers
    assert entries[PID].current_txn_first_offset == 0
    snap = part.producer_state.snapshot_path(3).read_bytes()
    # 46-byte entry: pid, epoch, last seq, last offset, delta, ts, coordinator epoch, txn first
    (txn_first,) = struct.unpack_from(">q", snap, len(snap) - 8)
    assert txn_first == 0


def test_follower_append_replays_markers_and_indexes_aborts(
    make_manager: ManagerFactory,
) -> None:
    leader = new_log(make_manager())
    txn(leader, 2)
    end(leader, commit=False)
    txn(leader, 1, seq=2)
    data = leader.read(0, 1 << 20, upper_bound="leo").to_bytes()
    follower = make_manager().create_log(TopicPartition("replica", 0), TOPIC_ID)
    follower.append_as_follower(data)
    assert follower.collect_aborted_txns(0, 4)[0] == [AbortedTxn(PID, 0, 2, 3)]
    assert follower.last_stable_offset == 3
    assert follower.has_ongoing_txn(PID)


def test_completed_transactions_are_forgotten_once_replicated(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    for i in range(50):
        txn(part, 1, seq=i)
        end(part, commit=i % 2 == 0)
    assert part.producer_state.unreplicated == []
    assert part.last_stable_offset == part.log_end_offset == 100


def test_dump_log_shows_markers_as_kafka_does(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    txn(part, 1)
    part.append_txn_marker(PID, 0, 3, committed=False, leader_epoch=0)
    lines = list(dump_file(part.segments()[-1].log_path))
    assert any(
        "offset: 1 " in line and line.endswith("endTxnMarker: ABORT coordinatorEpoch: 3")
        for line in lines
    ), lines
    assert any("isTransactional: true isControl: true" in line for line in lines)


def test_the_lso_waits_for_the_marker_to_be_below_the_high_watermark(
    make_manager: ManagerFactory,
) -> None:
    """Kafka's testFirstUnstableOffset: a completed transaction stays unstable until its
    marker is replicated (cluster mode: the replication layer sets the HW)."""
    part = new_log(make_manager())
    part.set_high_watermark(0)
    txn(part, 2)  # 0-1
    part.append_as_leader(batch(1), leader_epoch=0)  # 2
    end(part, commit=True)  # 3
    part.set_high_watermark(3)
    assert part.last_stable_offset == 0
    part.set_high_watermark(4)
    assert part.last_stable_offset == 4
    assert part.producer_state.unreplicated == []


def test_a_zero_copy_read_committed_fetch_gets_the_same_aborted_transactions(
    make_manager: ManagerFactory,
) -> None:
    """The aborted transactions a read_committed Fetch carries are found from the offset
    after its last batch, which a ``FileSlice`` knows without its bytes being read."""
    part = new_log(make_manager())
    for i in range(6):  # aborted and committed transactions of two producers, interleaved
        txn(part, 2, pid=PID, seq=2 * i)
        txn(part, 1, pid=OTHER, seq=i)
        end(part, commit=i % 2 == 0, pid=PID)
        end(part, commit=i % 3 == 0, pid=OTHER)
    size = scan_batches(part.read(0, 1 << 20).to_bytes())[0].size
    found = 0
    for offset in range(part.log_end_offset):
        for budget in (1, size + 1, 4 * size, 1 << 20):
            read = part.read(offset, budget, True, "lso")
            sliced = part.read(offset, budget, True, "lso", zero_copy=True)
            assert read.size == sliced.size
            aborted = part.aborted_txns_in(offset, read)
            assert part.aborted_txns_in(offset, sliced) == aborted
            found += len(aborted)
    assert found
