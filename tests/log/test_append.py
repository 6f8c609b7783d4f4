"""Append validation is all-or-nothing with Kafka's codes; size- and time-based rolls."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tests.log.log_helpers import ManagerFactory, ManualClock, batch, new_log
from tierlog.log import KafkaStorageError, LogAppendError, LogConfig
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import scan_batches


def test_batch_over_max_message_bytes_is_message_too_large(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager(LogConfig(max_message_bytes=200)))
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, value_size=300), leader_epoch=0)
    assert info.value.code is ErrorCode.MESSAGE_TOO_LARGE
    assert part.log_end_offset == 0 and part.active_segment.size == 0


def test_request_over_segment_bytes_is_record_list_too_large(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager(LogConfig(segment_bytes=150)))
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, value_size=50) * 3, leader_epoch=0)
    assert info.value.code is ErrorCode.RECORD_LIST_TOO_LARGE


def test_one_corrupt_batch_rejects_the_whole_append(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    good = batch(2)
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(good + bytes(bad), leader_epoch=0)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    assert part.log_end_offset == 0 and part.active_segment.size == 0
    assert part.append_as_leader(good + good, leader_epoch=0).last_offset == 3


def test_old_magic_rejected_with_unsupported_for_message_format(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager())
    legacy = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1000)
    legacy.append(0, timestamp=1, key=b"k", value=b"v")
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(bytes(legacy.build()), leader_epoch=0)
    assert info.value.code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert part.log_end_offset == 0


def test_offsets_assigned_by_patching_client_offsets(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(3), leader_epoch=0)
    result = part.append_as_leader(batch(2), leader_epoch=0)  # client sends base offset 0
    assert (result.base_offset, result.last_offset) == (3, 4)
    headers = scan_batches(part.read(0, 10_000).to_bytes())
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 4)]


def test_roll_on_segment_bytes(make_manager: ManagerFactory) -> None:
    one = len(batch(1))
    part = new_log(make_manager(LogConfig(segment_bytes=3 * one)))
    for _ in range(7):
        part.append_as_leader(batch(1), leader_epoch=0)
    assert [s.base_offset for s in part.segments()] == [0, 3, 6]


def test_roll_on_segment_ms_uses_batch_timestamps(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    part = new_log(make_manager(LogConfig(segment_ms=1_000)))
    t0 = clock.now
    part.append_as_leader(batch(1, ts=t0), leader_epoch=0)
    part.append_as_leader(batch(1, ts=t0 + 1_000), leader_epoch=0)  # not more than segment.ms
    assert len(part.segments()) == 1
    part.append_as_leader(batch(1, ts=t0 + 1_001), leader_epoch=0)
    assert [s.base_offset for s in part.segments()] == [0, 2]


def test_timestamp_too_far_in_future_is_invalid_timestamp(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    part = new_log(make_manager(LogConfig(message_timestamp_after_max_ms=60_000)))
    with pytest.raises(LogAppendError) as info:
        part.append_as_leader(batch(1, ts=clock.now + 120_000), leader_epoch=0)
    assert info.value.code is ErrorCode.INVALID_TIMESTAMP


def test_a_roll_that_cannot_create_files_is_a_storage_error_and_the_next_append_rolls(
    make_manager: ManagerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMFILE/ENOSPC while rolling (seen with thousands of untiered local segments): the
    produce gets KAFKA_STORAGE_ERROR, nothing is appended, and the log keeps working."""
    part = new_log(make_manager(LogConfig(segment_bytes=300)))
    while len(part.segments()) == 1:
        part.append_as_leader(batch(2), leader_epoch=0)
    end = part.log_end_offset
    real = part.producer_state.take_snapshot

    def no_files(*, durable: bool = True) -> Path:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(part.producer_state, "take_snapshot", no_files)
    with pytest.raises(KafkaStorageError) as err:
        for _ in range(50):  # until the active segment is full and must roll
            part.append_as_leader(batch(2), leader_epoch=0)
            end = part.log_end_offset
    assert err.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert part.log_end_offset == end  # the failed append left nothing behind
    segments = len(part.segments())
    monkeypatch.setattr(part.producer_state, "take_snapshot", real)
    assert part.append_as_leader(batch(2), leader_epoch=0).base_offset == end
    assert len(part.segments()) == segments + 1
    assert scan_batches(part.read(end, 1 << 20).to_bytes())[0].base_offset == end


def test_sealed_segments_keep_one_descriptor_each(make_manager: ManagerFactory) -> None:
    """Only the active segment's indexes keep their files open (they are remapped as they
    grow); a sealed index lives on its mapping, so untiered segments cost one fd each."""
    part = new_log(make_manager(LogConfig(segment_bytes=300)))
    while len(part.segments()) < 40:
        part.append_as_leader(batch(2), leader_epoch=0)

    targets = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            targets.append(Path(os.readlink(fd)))
        except OSError:
            continue
    mine = [t for t in targets if t.parent == part.dir]
    active = part.segments()[-1]
    assert sum(1 for t in mine if t.suffix == ".log") == 40
    indexes = {t for t in mine if t.suffix in (".index", ".timeindex")}
    assert indexes == {active.offset_index_path, active.time_index_path}  # no sealed one
    # sealed indexes still answer lookups from their mappings
    first = part.segments()[0]
    assert part.read(first.base_offset + 1, 1 << 20).first_batch_offset == first.base_offset


def test_a_roll_that_fails_opening_an_index_leaves_no_descriptor_open(
    make_manager: ManagerFactory,
) -> None:
    """The next append retries a failed roll; each failed attempt must close what it
    opened, or the retries exhaust the descriptors they were short of."""
    part = new_log(make_manager(LogConfig(segment_bytes=300)))
    part.append_as_leader(batch(2), leader_epoch=0)
    while True:  # find the offset the next roll will create files for
        before = len(part.segments())
        end = part.log_end_offset
        if part.segments()[-1].size + len(batch(2)) > 300:
            break
        part.append_as_leader(batch(2), leader_epoch=0)
        assert len(part.segments()) == before
    blocked = part.dir / f"{end:020d}.timeindex"
    blocked.mkdir()  # the time index cannot be created: the roll fails at its last file

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    fds = open_fds()
    for _ in range(20):
        with pytest.raises(KafkaStorageError):
            part.append_as_leader(batch(2), leader_epoch=0)
    assert open_fds() <= fds
    blocked.rmdir()
    assert part.append_as_leader(batch(2), leader_epoch=0).base_offset == end
