"""Byte formats of every file the log writes, compared with Kafka's layouts."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import crc32c

from tests.log.log_helpers import TOPIC_ID, TP, ManagerFactory, batch, new_log
from tierlog.log import LogConfig
from tierlog.log.checkpoint import read_offsets_checkpoint
from tierlog.protocol.records import scan_batches

N = 4


def ts_batch(i: int) -> bytes:
    return batch(1, ts=1_700_000_000_000 + i, tag=i)


def test_segment_rolls_after_exactly_n_batches(make_manager: ManagerFactory) -> None:
    cfg = LogConfig(index_interval_bytes=1, segment_index_bytes=12 * N)
    part = new_log(make_manager(cfg))
    for i in range(3 * N + 1):
        part.append_as_leader(ts_batch(i), leader_epoch=0)
    segs = part.segments()
    assert [s.base_offset for s in segs] == [0, N, 2 * N, 3 * N]
    for s in segs[:-1]:
        assert len(scan_batches(s.log_path.read_bytes())) == N


def test_first_segment_file_names_are_kafkas(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(3), leader_epoch=0)
    names = {p.name for p in part.dir.iterdir()}
    assert part.dir.name == "orders-0"
    assert {
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "partition.metadata",
        "leader-epoch-checkpoint",
    } <= names


def test_sealed_index_entries_have_kafka_layout(make_manager: ManagerFactory) -> None:
    cfg = LogConfig(index_interval_bytes=1, segment_index_bytes=12 * N)
    part = new_log(make_manager(cfg))
    sizes = []
    for i in range(N + 1):
        data = ts_batch(i)
        sizes.append(len(data))
        part.append_as_leader(data, leader_epoch=0)
    seg = part.segments()[0]
    raw_index = seg.offset_index_path.read_bytes()
    # The first batch gets no entry; batch k (k>=1) is indexed at its position by its offset.
    expected = b"".join(struct.pack(">II", k, sum(sizes[:k])) for k in range(1, N))
    assert raw_index == expected
    raw_time = seg.time_index_path.read_bytes()
    # One entry per indexed batch plus the roll-time entry for the max timestamp (batch N-1,
    # already the last entry, so nothing is added for it).
    expected_time = b"".join(struct.pack(">qI", 1_700_000_000_000 + k, k) for k in range(1, N))
    assert raw_time == expected_time


def test_active_index_preallocated_then_trimmed_on_roll(make_manager: ManagerFactory) -> None:
    cfg = LogConfig(index_interval_bytes=1, segment_index_bytes=12 * N)
    part = new_log(make_manager(cfg))
    part.append_as_leader(ts_batch(0), leader_epoch=0)
    active = part.segments()[-1]
    assert active.offset_index_path.stat().st_size == 12 * N  # 48 bytes = 6 slots of 8
    assert active.time_index_path.stat().st_size == 12 * N
    part.roll()
    sealed = part.segments()[0]
    assert sealed.offset_index_path.stat().st_size == 0
    assert sealed.time_index_path.stat().st_size == 12  # the roll-time entry


def test_checkpoint_files_text_format(make_manager: ManagerFactory, tmp_path: Path) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    part.append_as_leader(batch(5), leader_epoch=3)
    part.append_as_leader(batch(2), leader_epoch=4)
    part.delete_records(2)
    part.flush()
    mgr.flush_checkpoints()
    data = tmp_path / "data"
    assert (data / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 7\n"
    assert (data / "log-start-offset-checkpoint").read_text() == "0\n1\norders 0 2\n"
    assert (part.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n3 2\n4 5\n"
    b64 = base64.urlsafe_b64encode(TOPIC_ID.bytes).decode().rstrip("=")
    assert (part.dir / "partition.metadata").read_text() == f"version: 0\ntopic_id: {b64}"


def test_clean_shutdown_marker_written_and_consumed(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    mgr = make_manager()
    new_log(mgr).append_as_leader(batch(), leader_epoch=0)
    mgr.shutdown()
    marker = tmp_path / "data" / ".kafka_cleanshutdown"
    assert marker.exists()
    mgr2 = make_manager()
    assert mgr2.had_clean_shutdown(tmp_path / "data")
    assert not marker.exists()


def test_producer_snapshot_has_kafka_v1_layout(make_manager: ManagerFactory) -> None:
    part = new_log(make_manager())
    part.append_as_leader(batch(3, pid=1000, epoch=2, seq=0, ts=5_000), leader_epoch=0)
    part.roll()
    raw = (part.dir / "00000000000000000003.snapshot").read_bytes()
    version, crc = struct.unpack_from(">hI", raw, 0)
    assert version == 1 and crc == crc32c.crc32c(raw[6:])
    (count,) = struct.unpack_from(">i", raw, 6)
    assert count == 1 and len(raw) == 10 + 46
    fields = struct.unpack_from(">qhiqiqiq", raw, 10)
    # producer id, epoch, last seq, last offset, offset delta, timestamp, coord epoch, txn first
    assert fields == (1000, 2, 2, 2, 2, 5_000, -1, -1)


def test_recovery_checkpoint_reader_treats_garbage_as_missing(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("0\n3\norders 0 7\n")  # claims 3 entries, has 1
    assert read_offsets_checkpoint(path) == {}
    path.write_text("0\n1\norders 0 7\n")
    assert read_offsets_checkpoint(path) == {TP: 7}
