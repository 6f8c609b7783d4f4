"""What a follower's log needs (spec/kafka-replication.md F-7, §4.3, F-10): the leader's
batches appended as they are, truncation to a divergence point, and a high watermark the
replication layer sets and ``replication-offset-checkpoint`` keeps."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.log.log_helpers import ManagerFactory, batch
from tierlog.log import LogAppendError, LogConfig, PartitionLog, TopicPartition
from tierlog.log.leader_epoch import EpochEntry
from tierlog.log.names import REPLICATION_OFFSET_CHECKPOINT
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import scan_batches

LEADER = TopicPartition("orders", 0)
FOLLOWER = TopicPartition("orders", 1)
TID = uuid.UUID(int=7)


def _leader_with_epochs(mgr: object) -> PartitionLog:
    leader: PartitionLog = mgr.create_log(LEADER, TID)  # type: ignore[attr-defined]
    leader.append_as_leader(batch(2, tag=0), leader_epoch=0)
    leader.append_as_leader(batch(3, pid=5, epoch=0, seq=0), leader_epoch=0)
    leader.append_as_leader(batch(1, tag=3), leader_epoch=2)
    leader.append_as_leader(batch(2, pid=5, epoch=0, seq=3), leader_epoch=4)
    return leader


def test_follower_append_keeps_offsets_epochs_and_producer_state(
    make_manager: ManagerFactory,
) -> None:
    mgr = make_manager()
    leader = _leader_with_epochs(mgr)
    raw = leader.read(0, 1 << 20).to_bytes()
    follower = mgr.create_log(FOLLOWER, TID)
    result = follower.append_as_follower(raw)
    assert (result.base_offset, result.last_offset) == (0, 7)
    assert follower.log_end_offset == leader.log_end_offset == 8
    assert follower.read(0, 1 << 20).to_bytes() == raw
    assert follower.leader_epoch_cache.entries() == [
        EpochEntry(0, 0),
        EpochEntry(2, 5),
        EpochEntry(4, 6),
    ]
    assert follower.producer_state.producers[5].last_seq == 4
    with pytest.raises(LogAppendError) as info:
        follower.append_as_follower(raw)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE, "offsets below the LEO are refused"
    bad = bytearray(leader.read(6, 1 << 20).to_bytes())
    bad[-1] ^= 1
    with pytest.raises(LogAppendError):
        follower.append_as_follower(bytes(bad))


def test_truncate_to_removes_records_epochs_and_producer_state_above(
    make_manager: ManagerFactory,
) -> None:
    mgr = make_manager(LogConfig(segment_bytes=200))
    leader = _leader_with_epochs(mgr)
    assert len(leader.segments()) > 1, "the test needs a truncation across segments"
    assert leader.truncate_to(5)
    assert leader.log_end_offset == 5
    assert leader.leader_epoch_cache.entries() == [EpochEntry(0, 0)]
    assert leader.producer_state.producers[5].last_seq == 2
    assert leader.read(2, 1 << 20).first_batch_offset == 2
    assert leader.read(5, 1 << 20).size == 0
    leader.append_as_leader(batch(1, tag=9), leader_epoch=6)
    assert leader.log_end_offset == 6
    assert leader.leader_epoch_cache.entries() == [EpochEntry(0, 0), EpochEntry(6, 5)]
    assert not leader.truncate_to(6)
    assert leader.truncate_to(0)
    assert leader.log_end_offset == 0 and leader.leader_epoch_cache.entries() == []
    assert leader.producer_state.producers == {}


def test_replicated_high_watermark_bounds_reads_and_is_checkpointed(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    mgr = make_manager()
    leader = _leader_with_epochs(mgr)
    assert not leader.replicated and leader.high_watermark == 8
    assert leader.set_high_watermark(5) == 5
    assert leader.high_watermark == 5 and leader.last_stable_offset == 5
    visible = scan_batches(leader.read(0, 1 << 20).to_bytes())
    assert [h.base_offset for h in visible] == [0, 2]
    assert leader.read(5, 1 << 20).size == 0
    everything = scan_batches(leader.read(0, 1 << 20, upper_bound="leo").to_bytes())
    assert everything[-1].last_offset == 7
    assert leader.set_high_watermark(100) == 8
    leader.set_high_watermark(6)
    mgr.flush_checkpoints()
    files = list(tmp_path.rglob(REPLICATION_OFFSET_CHECKPOINT))
    assert len(files) == 1
    assert files[0].read_text().splitlines() == ["0", "1", "orders 0 6"]


def test_truncate_fully_and_start_at_restarts_an_empty_log(make_manager: ManagerFactory) -> None:
    """F-11: a follower whose LEO is below the leader's log start drops everything."""
    mgr = make_manager()
    plog = _leader_with_epochs(mgr)
    plog.set_high_watermark(8)
    plog.truncate_fully_and_start_at(20)
    assert (plog.log_start_offset, plog.local_log_start_offset, plog.log_end_offset) == (20, 20, 20)
    assert plog.high_watermark == 20
    assert plog.leader_epoch_cache.entries() == [] and plog.producer_state.producers == {}
    raw = batch(2, tag=5)
    leader = mgr.create_log(FOLLOWER, TID)
    leader.truncate_fully_and_start_at(20)
    leader.append_as_leader(raw, leader_epoch=7)
    plog.append_as_follower(leader.read(20, 1 << 20).to_bytes())
    assert plog.log_end_offset == 22
    assert plog.leader_epoch_cache.entries() == [EpochEntry(7, 20)]
