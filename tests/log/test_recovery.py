"""Crash recovery: torn tails, bad CRCs, lost indexes and checkpoints, a killed process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.log.log_helpers import TOPIC_ID, TP, ManagerFactory, batch, new_log
from tierlog.log import LogConfig, PartitionLog
from tierlog.log.checkpoint import read_epoch_checkpoint
from tierlog.log.leader_epoch import EpochEntry
from tierlog.protocol.records import Record, iter_records, scan_batches


def crash(mgr_logs: list[PartitionLog]) -> None:
    """Drop the logs without flushing, snapshots or the clean-shutdown marker."""
    for part in mgr_logs:
        part.close(clean=False)


def write_batches(part: PartitionLog, n: int) -> list[int]:
    sizes = []
    for i in range(n):
        data = batch(3, tag=i, ts=1_700_000_000_000 + i)
        sizes.append(len(data))
        part.append_as_leader(data, leader_epoch=1)
    return sizes


def test_torn_tail_is_truncated_after_unclean_shutdown(make_manager: ManagerFactory) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    sizes = write_batches(part, 5)
    log_path = part.segments()[-1].log_path
    crash(mgr.all_logs())
    with open(log_path, "r+b") as f:
        f.truncate(sum(sizes) - 7)  # cut into the last batch
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    assert part2.log_end_offset == 12
    assert log_path.stat().st_size == sum(sizes[:4])
    # The log keeps working at the recovered end.
    assert part2.append_as_leader(batch(1), leader_epoch=1).base_offset == 12


def test_corrupt_crc_in_tail_truncates_from_that_batch(make_manager: ManagerFactory) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    sizes = write_batches(part, 5)
    log_path = part.segments()[-1].log_path
    crash(mgr.all_logs())
    with open(log_path, "r+b") as f:
        f.seek(sum(sizes[:3]) + 70)  # inside batch 3's records
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x55]))
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    assert part2.log_end_offset == 9
    assert [h.base_offset for h in scan_batches(log_path.read_bytes())] == [0, 3, 6]


def test_segments_after_a_corrupt_one_are_dropped(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    cfg = LogConfig(segment_bytes=300)
    mgr = make_manager(cfg)
    part = new_log(mgr)
    write_batches(part, 8)
    segs = part.segments()
    assert len(segs) >= 3
    crash(mgr.all_logs())
    # Without a recovery point every segment is re-validated.
    (tmp_path / "data" / "recovery-point-offset-checkpoint").unlink()
    with open(segs[1].log_path, "r+b") as f:
        f.truncate(segs[1].size - 1)
    part2 = make_manager(cfg).get_log(TP)
    assert part2 is not None
    kept = part2.segments()
    assert [s.base_offset for s in kept] == [segs[0].base_offset, segs[1].base_offset]
    assert part2.log_end_offset == segs[1].end_offset + 1 - 3  # its last batch was torn
    assert not segs[2].log_path.exists()
    data = b"".join(s.log_path.read_bytes() for s in kept)
    offsets = [r.offset for r in iter_records_all(data)]
    assert offsets == list(range(part2.log_end_offset))


def iter_records_all(data: bytes) -> list[Record]:
    out: list[Record] = []
    for h in scan_batches(data):
        out.extend(iter_records(data, h))
    return out


def test_deleted_index_files_are_rebuilt_even_after_clean_shutdown(
    make_manager: ManagerFactory,
) -> None:
    cfg = LogConfig(index_interval_bytes=1, segment_bytes=400)
    mgr = make_manager(cfg)
    part = new_log(mgr)
    write_batches(part, 10)
    sealed = part.segments()[0]
    expected_index = sealed.offset_index_path.read_bytes()
    expected_time = sealed.time_index_path.read_bytes()
    assert expected_index
    mgr.shutdown()
    sealed.offset_index_path.unlink()
    sealed.time_index_path.unlink()
    part2 = make_manager(cfg).get_log(TP)
    assert part2 is not None
    assert part2.log_end_offset == 30
    rebuilt = part2.segments()[0]
    assert rebuilt.offset_index_path.read_bytes()[: len(expected_index)] == expected_index
    assert rebuilt.time_index_path.read_bytes()[: len(expected_time)] == expected_time
    assert part2.read(4, 1000).to_bytes()  # lookups through the rebuilt index work


def test_corrupt_index_file_is_rebuilt(make_manager: ManagerFactory) -> None:
    cfg = LogConfig(index_interval_bytes=1, segment_bytes=400)
    mgr = make_manager(cfg)
    part = new_log(mgr)
    write_batches(part, 10)
    sealed = part.segments()[0]
    mgr.shutdown()
    sealed.offset_index_path.write_bytes(b"\xff" * 13)  # not a multiple of 8
    part2 = make_manager(cfg).get_log(TP)
    assert part2 is not None
    assert part2.segments()[0].offset_index_path.stat().st_size % 8 == 0
    assert scan_batches(part2.read(5, 100).to_bytes())[0].base_offset == 3


def test_corrupt_checkpoints_are_treated_as_missing(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    write_batches(part, 3)
    mgr.shutdown()
    data = tmp_path / "data"
    (data / "recovery-point-offset-checkpoint").write_text("garbage\n")
    (data / "log-start-offset-checkpoint").write_text("0\n1\norders zero 1\n")
    (part.dir / "leader-epoch-checkpoint").write_text("9\n")
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    assert part2.log_end_offset == 9 and part2.log_start_offset == 0


_WRITER = textwrap.dedent(
    """
    import sys, uuid
    from pathlib import Path
    from tierlog.log import LogConfig, LogManager, TopicPartition
    from tierlog.protocol.records import build_batch
    mgr = LogManager([Path(sys.argv[1])], LogConfig(segment_bytes=50_000))
    mgr.load()
    part = mgr.create_log(TopicPartition("orders", 0), uuid.UUID(int=1))
    i = part.log_end_offset
    while True:
        r = part.append_as_leader(build_batch([b"%08d" % (i + k) for k in range(10)]), 0)
        i = r.last_offset + 1
        sys.stdout.write(f"{r.last_offset}\\n")
        sys.stdout.flush()
    """
)


def test_kill_9_mid_stream_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(data)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    acked = -1
    deadline = time.monotonic() + 60
    while acked < 20_000 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert acked >= 20_000, "writer did not get far enough"
    from tierlog.log import LogManager

    mgr = LogManager([data], LogConfig(segment_bytes=50_000))
    mgr.load()
    part = mgr.get_log(TP)
    assert part is not None
    assert not mgr.had_clean_shutdown(data)
    assert part.log_end_offset > acked
    values: list[bytes | None] = []
    offset = 0
    while offset < part.log_end_offset:
        chunk = part.read(offset, 1 << 20).to_bytes()
        for h in scan_batches(chunk):
            values.extend(r.value for r in iter_records(chunk, h))
            offset = h.next_offset
    assert values == [b"%08d" % i for i in range(len(values))]
    assert len(values) > acked
    mgr.shutdown()


def test_roll_defers_the_flush_and_the_recovery_point_follows_it(
    make_manager: ManagerFactory,
) -> None:
    """A roll no longer fsyncs on the caller: the recovery point stays until the background
    ``flush_sealed`` made the rolled segments durable, so an unclean restart before it
    re-validates them."""
    mgr = make_manager()
    part = new_log(mgr)
    write_batches(part, 2)
    part.flush()  # recovery point = LEO, in the middle of the active segment
    assert part.recovery_point == 6
    write_batches(part, 2)
    part.roll()
    write_batches(part, 1)
    assert part.recovery_point == 6  # the rolled segment (0..11) is not durable yet
    snapshot = part.dir / "00000000000000000012.snapshot"
    assert snapshot.exists()  # written at roll, fsynced later
    mgr.flush_sealed()
    assert part.recovery_point == 12  # the active segment's base
    mgr.flush_checkpoints()
    crash(mgr.all_logs())
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    assert part2.log_end_offset == 15
    assert part2.recovery_point == 15


def test_an_appended_epoch_is_synced_before_the_recovery_point_passes_it(
    make_manager: ManagerFactory,
) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    write_batches(part, 2)  # the first append starts epoch 1 at offset 0
    checkpoint = part.dir / "leader-epoch-checkpoint"
    assert read_epoch_checkpoint(checkpoint) == [(1, 0)]  # written at once, fsync deferred
    assert part.leader_epoch_cache.pending_sync
    part.roll()
    mgr.flush_sealed()
    assert part.recovery_point == 6
    assert not part.leader_epoch_cache.pending_sync
    write_batches(part, 1)
    part.leader_epoch_cache.assign(2, part.log_end_offset, durable=False)
    part.flush()  # a full flush syncs it too
    assert not part.leader_epoch_cache.pending_sync


def test_an_epoch_whose_unsynced_checkpoint_was_lost_is_rederived_by_recovery(
    make_manager: ManagerFactory,
) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    write_batches(part, 3)
    checkpoint = part.dir / "leader-epoch-checkpoint"
    crash(mgr.all_logs())
    checkpoint.write_text("0\n0\n")  # the deferred write never reached the disk
    part2 = make_manager().get_log(TP)
    assert part2 is not None
    assert part2.leader_epoch_cache.entries() == [EpochEntry(1, 0)]
    assert read_epoch_checkpoint(checkpoint) == [(1, 0)]


def test_delete_records_writes_the_epoch_checkpoint_and_defers_its_fsync(
    make_manager: ManagerFactory,
) -> None:
    """DeleteRecords and retention run on the event loop: moving the log start rewrites
    the leader-epoch checkpoint at once but leaves the fsyncs to the next flush."""
    mgr = make_manager()
    part = new_log(mgr)
    write_batches(part, 3)
    part.flush()
    assert not part.leader_epoch_cache.pending_sync
    part.delete_records(4)
    checkpoint = part.dir / "leader-epoch-checkpoint"
    assert read_epoch_checkpoint(checkpoint) == [(1, 4)]
    assert part.leader_epoch_cache.pending_sync
    part.flush()
    assert not part.leader_epoch_cache.pending_sync
    mgr.flush_checkpoints()  # the log start checkpoint is periodic, as in Kafka
    crash(mgr.all_logs())
    again = make_manager().get_log(TP)
    assert again is not None and again.log_start_offset == 4
    assert again.leader_epoch_cache.entries() == [(1, 4)]


def test_a_log_that_lost_its_partition_metadata_takes_its_topic_id_when_opened(
    make_manager: ManagerFactory,
) -> None:
    """A kill between a partition directory's creation and its ``partition.metadata`` leaves
    a log with no topic id; opening it for its topic (a hosted replica, a restart) writes the
    id again, so tiered storage can name the partition."""
    mgr = make_manager()
    part = new_log(mgr)
    write_batches(part, 2)
    crash(mgr.all_logs())
    (part.dir / "partition.metadata").unlink()
    mgr2 = make_manager()
    loaded = mgr2.get_log(TP)
    assert loaded is not None and loaded.topic_id is None
    assert mgr2.create_log(TP, TOPIC_ID) is loaded
    assert loaded.topic_id == TOPIC_ID
    reopened = make_manager().get_log(TP)
    assert reopened is not None and reopened.topic_id == TOPIC_ID


def test_a_log_with_another_topic_id_is_not_given_a_new_one(make_manager: ManagerFactory) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    other = uuid.UUID(int=7)
    with pytest.raises(ValueError, match="has topic id"):
        mgr.create_log(TP, other)
    assert part.topic_id == TOPIC_ID
