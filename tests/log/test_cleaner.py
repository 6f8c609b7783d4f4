"""The log cleaner on real partition logs: what survives a cleaning, and its file protocol."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import crc32c
import pytest

from tests.helpers.poll import wait_until
from tests.log.cleaner_helpers import clean_fully, keyed_batch, make_cleaner, read_rows
from tests.log.log_helpers import TOPIC_ID, TP, ManagerFactory, ManualClock
from tierlog.log import LogConfig
from tierlog.protocol.records import (
    Compression,
    SimpleRecord,
    build_batch,
    iter_records,
    scan_batches,
)

COMPACT = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=1024,
    min_cleanable_dirty_ratio=0.01,
    file_delete_delay_ms=0,
)


def test_keeps_latest_value_per_key_at_its_offset(
    make_manager: ManagerFactory, clock: ManualClock, tmp_path: Path
) -> None:
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    expected: dict[bytes, tuple[int, bytes]] = {}
    for i in range(200):
        key = b"k%d" % (i % 7)
        value = b"v%d" % i
        res = plog.append_as_leader(keyed_batch([(key, value)], ts=clock.now), 0)
        expected[key] = (res.base_offset, value)
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert clean_fully(service, worker, clock.now) >= 1
    rows = read_rows(plog)
    assert {k: (o, v) for o, k, v, _ in rows if k is not None} == expected
    assert [r[0] for r in rows] == sorted(o for o, _ in expected.values())
    before = len(plog.segments())
    res = plog.append_as_leader(keyed_batch([(b"k0", b"last")], ts=clock.now), 0)
    expected[b"k0"] = (res.base_offset, b"last")
    plog.roll()
    assert clean_fully(service, worker, clock.now) >= 1
    rows = read_rows(plog)
    assert {k: (o, v) for o, k, v, _ in rows if k is not None} == expected
    assert len(plog.segments()) < before, "small cleaned segments are merged"
    assert (tmp_path / "data" / "cleaner-offset-checkpoint").read_text().splitlines()[2] == (
        f"{TP.topic} {TP.partition} {plog.segments()[-1].base_offset}"
    )


def test_compressed_batches_keep_codec_and_producer_fields(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    seq = 0
    for i in range(30):
        items: list[tuple[bytes | None, bytes | None]] = [
            (b"a", b"x%d" % i),
            (b"b%d" % (i % 3), b"y%d" % i),
        ]
        zstd = keyed_batch(
            items, ts=clock.now + i, compression=Compression.ZSTD, pid=7, epoch=1, seq=seq
        )
        plog.append_as_leader(zstd, 0)
        seq += 2
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    clean_fully(service, worker, clock.now + 100)
    rows = read_rows(plog)
    latest = {k: v for _, k, v, _ in rows}
    assert latest == {b"a": b"x29", b"b0": b"y27", b"b1": b"y28", b"b2": b"y29"}
    data = plog.read(0, 1 << 20).to_bytes()
    for h in scan_batches(data):
        assert h.compression is Compression.ZSTD or h.records_count == 0
        assert h.producer_id == 7 and h.producer_epoch == 1
        assert h.last_offset_delta == 1
    # the producer's next batch is still in sequence
    plog.append_as_leader(keyed_batch([(b"a", b"z")], ts=clock.now, pid=7, epoch=1, seq=seq), 0)


def test_producer_last_batch_is_kept_empty_so_its_sequence_continues(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    plog.append_as_leader(keyed_batch([(b"a", b"1")], ts=clock.now, pid=9, epoch=0, seq=0), 0)
    plog.append_as_leader(keyed_batch([(b"a", b"2")], ts=clock.now), 0)
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert clean_fully(service, worker, clock.now) == 1
    data = plog.read(0, 1 << 20).to_bytes()
    headers = scan_batches(data)
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [
        (0, 0, 9),
        (1, 1, -1),
    ]
    assert read_rows(plog) == [(1, b"a", b"2", clock.now)]
    res = plog.append_as_leader(keyed_batch([(b"b", b"3")], ts=clock.now, pid=9, epoch=0, seq=1), 0)
    assert not res.duplicate and res.base_offset == 2


def test_corrupt_segment_marks_partition_uncleanable_and_keeps_serving(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    for i in range(50):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 3), b"v%d" % i)], ts=clock.now), 0)
    plog.roll()
    seg = plog.segments()[1]
    with open(seg.log_path, "r+b") as f:
        f.seek(seg.size - 3)
        f.write(b"\xff\xff\xff")
    served = [plog.read(i.base_offset, 1 << 20).to_bytes() for i in plog.segments()[:-1]]
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert service.clean_once(worker, clock.now)
    assert service.uncleanable_partitions == {TP}
    assert service.health().uncleanable_partitions == 1
    assert not service.clean_once(worker, clock.now), "an uncleanable partition is skipped"
    assert [plog.read(i.base_offset, 1 << 20).to_bytes() for i in plog.segments()[:-1]] == served
    assert not [p for p in plog.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_max_compaction_lag_cleans_below_the_dirty_ratio(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    import dataclasses

    lazy = dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.99)
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, lazy)
    for i in range(40):
        plog.append_as_leader(keyed_batch([(b"k", b"v%d" % i)], ts=clock.now), 0)
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert service.clean_once(worker, clock.now), "all dirty: ratio 1"
    plog.append_as_leader(keyed_batch([(b"k", b"new")], ts=clock.now), 0)
    plog.roll()
    assert not service.clean_once(worker, clock.now)
    mgr.update_config(TP.topic, dataclasses.replace(lazy, max_compaction_lag_ms=1_000))
    assert not service.clean_once(worker, clock.now + 500)
    assert service.clean_once(worker, clock.now + 5_000)
    assert [r[2] for r in read_rows(plog)] == [b"new"]
    assert service.health().max_compaction_delay_ms == 4_000


def test_cleaner_threads_clean_in_the_background_and_stop_with_the_manager(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    from tierlog.log.cleaner.config import CleanerConfig
    from tierlog.log.cleaner.throttler import Throttler

    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    for i in range(100):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 4), b"v%d" % i)], ts=clock.now), 0)
    plog.roll()
    cleaner = mgr.start_cleaner(
        CleanerConfig(threads=2, backoff_ms=10, io_max_bytes_per_second=10_000_000)
    )
    wait_until(lambda: len(read_rows(plog)) <= 4, 20, what="the background cleaning")
    assert [r[2] for r in read_rows(plog)] == [b"v96", b"v97", b"v98", b"v99"]
    threads = list(cleaner._threads)
    assert len(threads) == 2
    mgr.shutdown()
    assert not any(t.is_alive() for t in threads)
    assert isinstance(cleaner._throttler, Throttler)


def test_throttler_holds_the_rate() -> None:
    import threading

    from tierlog.log.cleaner.throttler import Throttler

    ticks = iter(i * 0.01 for i in range(100))
    t = Throttler(1_000_000, threading.Event(), check_interval_s=0.005, clock=lambda: next(ticks))
    start = time.monotonic()
    t.maybe_throttle(100_000)  # 100 kB in 10 ms: 90 ms more to stay at 1 MB/s
    assert abs(t.throttled_s - 0.09) < 1e-6
    assert time.monotonic() - start >= 0.08


def test_offset_map_is_bounded_and_keeps_the_latest_offset() -> None:
    from tierlog.log.cleaner.offset_map import ENTRY_SIZE, OffsetMap

    m = OffsetMap(100 * ENTRY_SIZE, 0.9)
    assert (m.slots, m.max_entries) == (100, 90)
    for i in range(90):
        m.put(b"key-%d" % i, i)
    m.put(b"key-3", 500)
    assert m.size == 90 and m.is_full(1) and not m.is_full(0)
    assert m.get(b"key-3") == 500 and m.get(b"key-89") == 89 and m.get(b"other") == -1
    m.clear()
    assert m.size == 0 and m.get(b"key-3") == -1


def test_dump_log_shows_the_gaps_of_a_cleaned_segment(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    from tierlog.log import dump_file

    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    for i in range(6):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 2), b"v%d" % i)], ts=clock.now), 0)
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert service.clean_once(worker, clock.now)
    lines = list(dump_file(plog.segments()[0].log_path))
    gaps = [line for line in lines if line.startswith("| gap")]
    assert gaps == ["| gap: offsets 0..3 compacted away"]
    shallow = [
        x for x in dump_file(plog.segments()[0].log_path, deep=False) if x.startswith("| gap")
    ]
    assert shallow == ["| gap: offsets 0..3 compacted away"]


def test_compacted_log_refuses_keyless_records_like_kafka(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    from tierlog.log import LogAppendError
    from tierlog.protocol.errors import ErrorCode

    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(keyed_batch([(b"k", b"1"), (None, b"2")], ts=clock.now), 0)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert "Compacted topic cannot accept message without key" in str(e.value)
    assert plog.log_end_offset == 0
    # a record whose value and headers do not fill its length, under a valid CRC
    bad = bytearray(keyed_batch([(b"k", b"12")], ts=clock.now))
    at = bytes(bad).index(b"k\x0412")
    bad[at + 1] = 0x02
    bad[17:21] = crc32c.crc32c(bytes(bad[21:])).to_bytes(4, "big")
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(bytes(bad), 0)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert plog.log_end_offset == 0


def test_retention_removing_a_segment_mid_cleaning_aborts_that_swap_only(
    make_manager: ManagerFactory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from tierlog.log.cleaner.cleaned_segment import CleanedSegmentWriter

    both = dataclasses.replace(COMPACT, cleanup_policy=("compact", "delete"))
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, both)
    for i in range(60):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 4), b"v%d" % i)], ts=clock.now), 0)
    plog.roll()
    second = plog.segments()[1].base_offset
    real_finish = CleanedSegmentWriter.finish

    def finish(self: CleanedSegmentWriter, mtime_s: float | None) -> None:
        real_finish(self, mtime_s)
        plog.delete_records(second)
        plog.run_retention(clock.now)

    monkeypatch.setattr(CleanedSegmentWriter, "finish", finish)
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert service.clean_once(worker, clock.now)
    assert not service.uncleanable_partitions
    assert service.checkpointed_offset(TP) is None, "an aborted cleaning moves no checkpoint"
    assert not [p for p in plog.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    monkeypatch.undo()
    assert clean_fully(service, worker, clock.now) >= 1
    assert {k: v for _, k, v, _ in read_rows(plog)} == {
        b"k0": b"v56",
        b"k1": b"v57",
        b"k2": b"v58",
        b"k3": b"v59",
    }


def test_health_reports_each_compacted_logs_dirty_ratio(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    for i in range(60):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 3), b"v" * 50)], ts=clock.now), 0)
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert service.health().dirty_ratios == {TP: 1.0}
    assert clean_fully(service, worker, clock.now) >= 1
    assert service.health().dirty_ratios == {TP: 0.0}
    for i in range(30):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 3), b"v" * 50)], ts=clock.now), 0)
    plog.roll()
    sealed = plog.segments()[:-1]
    clean_end = service.checkpointed_offset(TP)
    clean = sum(s.size for s in sealed if s.base_offset < (clean_end or 0))
    dirty = sum(s.size for s in sealed) - clean
    assert dirty > 0
    assert clean > 0
    assert service.health().dirty_ratios[TP] == dirty / (clean + dirty)


def test_a_replica_cleans_only_below_its_high_watermark(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    """Kafka's first uncleanable offset is bounded by the last stable offset, which never
    passes the HW: a follower whose HW lags its LEO leaves every sealed segment at or above
    the HW's segment as it was fetched, even where newer records make them obsolete."""
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    for i in range(120):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 3), b"v" * 50)], ts=clock.now), 0)
    plog.roll()
    sealed = plog.segments()[:-1]
    assert len(sealed) >= 4
    hw = (sealed[2].base_offset + sealed[2].next_offset) // 2
    assert plog.set_high_watermark(hw) == hw
    before = {o: (k, v) for o, k, v, _ in read_rows(plog) if o >= sealed[2].base_offset}
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert clean_fully(service, worker, clock.now) >= 1
    rows = read_rows(plog)
    assert {o: (k, v) for o, k, v, _ in rows if o >= sealed[2].base_offset} == before
    assert len([r for r in rows if r[0] < sealed[2].base_offset]) == 3, "below it: one per key"
    assert service.checkpointed_offset(TP) == sealed[2].base_offset
    plog.set_high_watermark(plog.log_end_offset)
    assert clean_fully(service, worker, clock.now) >= 1
    assert len(read_rows(plog)) == 3


def test_large_records_and_headers_are_kept_byte_for_byte(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    """Keys and values past 8 KiB (three-byte length varints), headers, and a batch the
    cleaner rewrites around them: every kept record reads back exactly as written."""
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, replace(COMPACT, segment_bytes=64 << 10))
    big_key = b"K" * 9000
    written: dict[bytes | None, tuple[int, bytes | None]] = {}
    for i in range(6):
        recs = [
            SimpleRecord(b"%d" % i + b"v" * 20000, big_key, clock.now, (("h", b"x" * 300),)),
            SimpleRecord(b"small%d" % i, b"k%d" % (i % 2), clock.now, (("h2", None),)),
        ]
        res = plog.append_as_leader(build_batch(recs, timestamp=clock.now), 0)
        written[big_key] = (res.base_offset, recs[0].value)
        written[recs[1].key] = (res.base_offset + 1, recs[1].value)
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert clean_fully(service, worker, clock.now) >= 1
    rows = read_rows(plog)
    assert {k: (o, v) for o, k, v, _ in rows} == written
    data = plog.read(0, 1 << 22).to_bytes()
    headers = [r.headers for h in scan_batches(data) for r in iter_records(data, h)]
    assert sorted(map(str, headers)) == sorted(
        [str((("h", b"x" * 300),)), str((("h2", None),)), str((("h2", None),))]
    )


def test_a_truncation_under_the_cleaner_aborts_that_cleaning_only(
    make_manager: ManagerFactory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica truncated while its segment is being read (Kafka pauses the cleaner for a
    truncation): the cleaning is abandoned, the partition is not marked uncleanable, and
    the next cleaning works on the truncated log."""
    from tierlog.log.cleaner import cleaner as cleaner_module
    from tierlog.log.cleaner.cleaner import Cleaner

    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    for i in range(60):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 4), b"v%d" % i)], ts=clock.now), 0)
    plog.roll()
    monkeypatch.setattr(cleaner_module, "_READ_CHUNK", 100)
    real_check = Cleaner._check
    calls = 0

    def check(self: Cleaner, log: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            plog.truncate_to(5)
        real_check(self, plog)

    monkeypatch.setattr(Cleaner, "_check", check)
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert service.clean_once(worker, clock.now)
    assert calls >= 3
    assert not service.uncleanable_partitions
    assert service.checkpointed_offset(TP) is None, "an aborted cleaning moves no checkpoint"
    monkeypatch.undo()
    assert plog.log_end_offset == 5
    for i in range(5, 40):
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 4), b"w%d" % i)], ts=clock.now), 0)
    plog.roll()
    assert clean_fully(service, worker, clock.now) >= 1
    assert {k: v for _, k, v, _ in read_rows(plog)} == {
        b"k0": b"w36",
        b"k1": b"w37",
        b"k2": b"w38",
        b"k3": b"w39",
    }
