"""Fetch semantics: offset lookup through the index, max_bytes, minOneMessage, timestamps."""

from __future__ import annotations

import os
from typing import Literal

import pytest

from tests.log.log_helpers import ManagerFactory, ManualClock, batch, new_log
from tierlog.log import LogConfig, OffsetOutOfRange, PartitionLog
from tierlog.log.file_slice import FileSlice, SliceUnavailable
from tierlog.protocol.records import (
    RecordsError,
    SimpleRecord,
    build_batch,
    iter_records,
    next_offset_after,
    scan_batches,
)

BASE_TS = 1_700_000_000_000


def filled(
    make_manager: ManagerFactory, batches: int = 30, cfg: LogConfig | None = None
) -> PartitionLog:
    part = new_log(make_manager(cfg or LogConfig(index_interval_bytes=200, segment_bytes=2_000)))
    for i in range(batches):
        part.append_as_leader(batch(4, ts=BASE_TS + 10 * i, value_size=20, tag=i), leader_epoch=0)
    return part


def test_read_returns_whole_batches_starting_at_the_one_holding_offset(
    make_manager: ManagerFactory,
) -> None:
    part = filled(make_manager)
    assert len(part.segments()) >= 3  # reads cross segment and index boundaries
    for offset in range(0, 120, 7):
        data = part.read(offset, 500).to_bytes()
        headers = scan_batches(data)
        assert headers[0].base_offset <= offset <= headers[0].last_offset
        assert sum(h.size for h in headers) == len(data) <= 500
        values = [r.value for r in iter_records(data, headers[0])]
        assert values[0] == bytes([65 + (offset // 4) % 26]) * 20


def test_max_bytes_smaller_than_first_batch(make_manager: ManagerFactory) -> None:
    part = filled(make_manager, 3)
    size = scan_batches(part.read(0, 10_000).to_bytes())[0].size
    with_min = part.read(0, 10, min_one_message=True)
    assert with_min.size == size and len(scan_batches(with_min.to_bytes())) == 1
    without = part.read(0, 10, min_one_message=False)
    assert without.size == 0 and without.chunks == []


def test_read_at_log_end_is_empty_and_beyond_is_out_of_range(make_manager: ManagerFactory) -> None:
    part = filled(make_manager, 3)
    assert part.read(12, 1000).size == 0
    with pytest.raises(OffsetOutOfRange) as info:
        part.read(13, 1000)
    assert info.value.log_end_offset == 12


def test_read_chunks_are_not_python_level_record_copies(make_manager: ManagerFactory) -> None:
    part = filled(make_manager, 5, LogConfig())
    fetch = part.read(0, 1 << 20)
    assert len(fetch.chunks) == 1
    assert isinstance(fetch.chunks[0], bytes | memoryview)
    assert fetch.size == part.segments()[0].size


def test_offset_for_timestamp_uses_time_index(make_manager: ManagerFactory) -> None:
    part = filled(make_manager)
    # batch i has timestamp BASE_TS + 10*i for all 4 records, offsets 4i..4i+3
    assert part.offset_for_timestamp(BASE_TS + 55) == (24, BASE_TS + 60, 0)
    assert part.offset_for_timestamp(BASE_TS + 60) == (24, BASE_TS + 60, 0)
    assert part.offset_for_timestamp(0) == (0, BASE_TS, 0)
    assert part.offset_for_timestamp(BASE_TS + 10_000) is None


def test_offset_for_timestamp_inside_a_batch(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    recs = [SimpleRecord(b"v", timestamp=BASE_TS + t) for t in (5, 1, 9, 7)]
    part.append_as_leader(build_batch([b"x"], timestamp=BASE_TS), leader_epoch=2)
    part.append_as_leader(build_batch(recs), leader_epoch=2)
    assert part.offset_for_timestamp(BASE_TS + 6) == (3, BASE_TS + 9, 2)
    assert part.offset_for_max_timestamp() == (3, BASE_TS + 9, 2)


def test_log_append_time_sets_batch_timestamp(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    part = new_log(make_manager(LogConfig(message_timestamp_type="LogAppendTime")))
    result = part.append_as_leader(batch(3, ts=5), leader_epoch=0)
    assert result.log_append_time_ms == clock.now
    data = part.read(0, 10_000).to_bytes()
    assert {r.timestamp for r in iter_records(data)} == {clock.now}


def _rchar() -> int:
    """Bytes this process has read through read/pread so far (the kernel's count)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def _large_batches(make_manager: ManagerFactory, n: int) -> tuple[PartitionLog, int]:
    """``n`` batches of ~200 KiB in one segment, with no index entry between them (a Fetch
    walks from the segment's start to the batch it wants)."""
    cfg = LogConfig(index_interval_bytes=1 << 30, segment_bytes=1 << 30)
    part = new_log(make_manager(cfg))
    for i in range(n):
        part.append_as_leader(batch(4, value_size=50_000, tag=i), leader_epoch=0)
    size = scan_batches(part.read(0, 1).to_bytes())[0].size
    assert size > 64 * 1024  # larger than a validating walk's read
    return part, size


def test_a_fetch_reads_the_headers_before_its_batch_and_the_batch_once(
    make_manager: ManagerFactory,
) -> None:
    part, size = _large_batches(make_manager, 6)
    before = _rchar()
    fetch = part.read(17, size)  # in the fifth batch
    read = _rchar() - before
    data = fetch.to_bytes()
    assert scan_batches(data)[0].base_offset == 16 and len(data) == size
    # the batch once, plus a header per batch walked over (not those batches whole)
    assert read < size + 4096


def test_damage_between_the_index_entry_and_the_offset_is_reported(
    make_manager: ManagerFactory,
) -> None:
    part, size = _large_batches(make_manager, 6)
    with open(part.segments()[0].log_path, "r+b") as f:
        f.seek(2 * size + 8)  # the third batch's length field
        f.write(b"\x00\x00\x00\x05")
    with pytest.raises(RecordsError):
        part.read(17, size)
    assert scan_batches(part.read(0, size).to_bytes())[0].base_offset == 0


def _mixed(make_manager: ManagerFactory) -> PartitionLog:
    """Batches from ~100 bytes to ~90 KiB in segments of ~300 KiB with an index entry every
    4 KiB: ranges end among small batches, inside large ones and at segment ends."""
    cfg = LogConfig(index_interval_bytes=4096, segment_bytes=300_000)
    part = new_log(make_manager(cfg))
    sizes = [10, 40, 3000, 10, 90_000, 500, 10, 10, 45_000, 10, 2000, 70_000, 10, 10, 10]
    for i, value_size in enumerate(sizes * 4):
        part.append_as_leader(batch(3, value_size=value_size, tag=i), leader_epoch=0)
    return part


@pytest.mark.parametrize("upper", ["hw", "leo"])
def test_a_zero_copy_read_names_the_same_whole_batches_as_a_read(
    make_manager: ManagerFactory, upper: Literal["hw", "leo"]
) -> None:
    part = _mixed(make_manager)
    assert len(part.segments()) >= 3
    for offset in range(0, part.log_end_offset, 2):
        for budget in (1, 150, 5_000, 70_000, 100_000, 250_000):
            for min_one in (True, False):
                read = part.read(offset, budget, min_one, upper)
                sliced = part.read(offset, budget, min_one, upper, zero_copy=True)
                data = read.to_bytes()
                assert sliced.to_bytes() == data, (offset, budget, min_one)
                assert (sliced.size, sliced.first_batch_offset) == (
                    read.size,
                    read.first_batch_offset,
                )
                if data:
                    (chunk,) = sliced.chunks
                    assert isinstance(chunk, FileSlice)
                    assert chunk.next_offset == next_offset_after(data)


def test_a_zero_copy_read_reads_batch_headers_not_batches(make_manager: ManagerFactory) -> None:
    part, size = _large_batches(make_manager, 6)
    before = _rchar()
    sliced = part.read(5, 3 * size + 100, zero_copy=True)  # batches 2-4, then part of 5
    read = _rchar() - before
    (chunk,) = sliced.chunks
    assert isinstance(chunk, FileSlice) and len(chunk) == 3 * size
    assert chunk.next_offset == 16
    assert read < 4096  # headers only: five walked to the offset, four to the range's end


def test_a_file_slice_outlives_its_deleted_and_closed_segment(
    make_manager: ManagerFactory,
) -> None:
    """Retention may delete and close a segment between the read that made a slice and the
    slice's send: the file stays open for the slice, and closes when the slice is gone."""
    part = filled(make_manager, cfg=LogConfig(index_interval_bytes=200, segment_bytes=2_000))
    expected = part.read(0, 500).to_bytes()
    (chunk,) = part.read(0, 500, zero_copy=True).chunks
    assert isinstance(chunk, FileSlice)
    fd = chunk.fd
    part.close()
    for path in part.dir.glob("*.log"):
        path.unlink()
    assert bytes(chunk) == expected
    del chunk
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_file_slice_of_a_truncated_segment_cannot_be_read(make_manager: ManagerFactory) -> None:
    part = filled(make_manager)
    (chunk,) = part.read(0, 500, zero_copy=True).chunks
    assert isinstance(chunk, FileSlice)
    assert bytes(chunk) == part.read(0, 500).to_bytes()
    part.truncate_to(4)  # the slice reaches past the first batch (offsets 0-3)
    with pytest.raises(SliceUnavailable):
        chunk.read()
