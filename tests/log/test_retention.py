"""Retention by time and size, DeleteRecords, and the tier-aware local rules (spec §1.8)."""

from __future__ import annotations

import uuid

import pytest

from tests.log.log_helpers import ManagerFactory, ManualClock, batch, new_log
from tierlog.log import LogConfig, OffsetOutOfRange, PartitionLog, TopicPartition

DAY = 86_400_000


def fill(part: PartitionLog, n: int, ts: int) -> None:
    for i in range(n):
        part.append_as_leader(batch(3, ts=ts + i, tag=i), leader_epoch=0)


def test_time_retention_deletes_old_segments_and_moves_log_start(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    cfg = LogConfig(segment_bytes=400, retention_ms=7 * DAY, file_delete_delay_ms=1_000)
    part = new_log(make_manager(cfg))
    fill(part, 6, clock.now - 10 * DAY)  # old data
    fill(part, 4, clock.now)  # fresh data
    before = part.segments()
    old = [s for s in before if s.largest_timestamp < clock.now - 7 * DAY]
    assert old and len(old) < len(before)
    deleted = part.run_retention()
    assert deleted == len(old)
    first_kept = before[len(old)].base_offset
    assert part.log_start_offset == part.local_log_start_offset == first_kept
    assert all(not s.log_path.exists() for s in old)
    trash = sorted(p.name for p in part.dir.glob("*.deleted"))
    assert trash and all(name.endswith(".log.deleted") or ".index" in name for name in trash[:1])
    clock.advance(1_000)
    part.run_retention()
    assert not list(part.dir.glob("*.deleted"))
    with pytest.raises(OffsetOutOfRange):
        part.read(0, 100)


def test_time_retention_rolls_and_deletes_everything_when_all_expired(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    cfg = LogConfig(segment_bytes=400, retention_ms=DAY, file_delete_delay_ms=0)
    part = new_log(make_manager(cfg))
    fill(part, 5, clock.now - 2 * DAY)
    leo = part.log_end_offset
    part.run_retention()
    assert [s.base_offset for s in part.segments()] == [leo]
    assert part.log_start_offset == leo and part.size == 0


def test_size_retention_keeps_newest_within_limit(make_manager: ManagerFactory) -> None:
    cfg = LogConfig(segment_bytes=400, retention_bytes=800, file_delete_delay_ms=0)
    part = new_log(make_manager(cfg))
    fill(part, 20, 1_700_000_000_000)
    part.run_retention()
    assert part.size >= 800 - 400
    sizes = [s.size for s in part.segments()]
    # Deleting the oldest remaining segment would take the log below the limit.
    assert sum(sizes) - sizes[0] < 800
    assert part.log_start_offset == part.segments()[0].base_offset


def test_delete_records_moves_log_start_and_frees_whole_segments(
    make_manager: ManagerFactory,
) -> None:
    cfg = LogConfig(segment_bytes=400, file_delete_delay_ms=0)
    part = new_log(make_manager(cfg))
    fill(part, 10, 1_700_000_000_000)
    segs = part.segments()
    target = segs[2].base_offset + 1
    assert part.delete_records(target) == target
    assert part.log_start_offset == target
    with pytest.raises(OffsetOutOfRange):
        part.read(target - 1, 100)
    assert part.read(target, 100).size > 0
    part.run_retention()
    assert part.segments()[0].base_offset == segs[2].base_offset
    with pytest.raises(OffsetOutOfRange):
        part.delete_records(part.high_watermark + 1)


def test_tiered_local_retention_waits_for_upload_and_moves_only_local_start(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    cfg = LogConfig(
        segment_bytes=400,
        retention_ms=30 * DAY,
        local_retention_ms=DAY,
        remote_storage_enable=True,
        file_delete_delay_ms=0,
    )
    mgr = make_manager(cfg, remote_storage_system_enable=True)
    part = new_log(mgr)
    assert part.remote_enabled
    fill(part, 8, clock.now - 2 * DAY)
    segs = part.segments()
    assert len(segs) == 3
    assert part.run_retention() == 0  # nothing uploaded yet: nothing deleted, no roll
    assert part.segments() == segs
    part.update_highest_offset_in_remote_storage(segs[1].end_offset)
    assert part.run_retention() == 2
    assert part.local_log_start_offset == segs[2].base_offset
    # The walk reached the breached active segment, so it was rolled to be uploaded next.
    assert [s.base_offset for s in part.segments()] == [segs[2].base_offset, part.log_end_offset]
    assert part.log_start_offset == 0
    part.update_highest_offset_in_remote_storage(5)  # never decreases
    assert part.highest_offset_in_remote_storage == segs[1].end_offset
    with pytest.raises(OffsetOutOfRange) as info:
        part.read(0, 100)
    assert info.value.log_start_offset == 0  # caller sees a remote read is possible
    part.update_log_start_offset_from_remote(3)
    assert part.log_start_offset == 3


def test_tiered_log_start_passing_segment_allows_local_deletion(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    cfg = LogConfig(
        segment_bytes=400, local_retention_ms=-2, remote_storage_enable=True, file_delete_delay_ms=0
    )
    part = new_log(make_manager(cfg, remote_storage_system_enable=True))
    fill(part, 8, clock.now)
    segs = part.segments()
    part.delete_records(segs[1].base_offset)
    assert part.run_retention() == 1
    assert part.segments()[0].base_offset == segs[1].base_offset
    assert part.local_log_start_offset == segs[1].base_offset


def test_a_sliced_retention_pass_skips_a_log_deleted_between_its_steps(
    make_manager: ManagerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker runs a pass one partition per step, yielding to its loop in between; a
    topic deleted meanwhile must not make the rest of the pass fail."""
    mgr = make_manager(LogConfig(retention_bytes=1, segment_bytes=200))
    tps = [TopicPartition("sliced", p) for p in range(3)]
    for tp in tps:
        part = mgr.create_log(tp, uuid.uuid4())
        for i in range(6):
            part.append_as_leader(batch(3, tag=i), leader_epoch=0)
    parts = [mgr.get_log(tp) for tp in tps]
    assert all(p is not None and len(p.segments()) > 1 for p in parts)
    steps = mgr.retention_steps()
    first = next(steps)
    mgr.delete_log(tps[2] if first != tps[2] else tps[1])
    rest = list(steps)
    assert len(rest) == 2  # every partition of the snapshot gets its step
    assert not [r for r in caplog.records if "retention pass failed" in r.getMessage()]
    for tp in tps:
        left = mgr.get_log(tp)
        if left is not None:
            assert len(left.segments()) == 1  # size retention kept only the active segment
