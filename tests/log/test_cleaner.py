"""The log cleaner on real partition logs: what survives a cleaning, and its file protocol."""

from __future__ import annotations

from pathlib import Path

from cleaner_helpers import clean_fully, keyed_batch, make_cleaner, read_rows
from log_helpers import TOPIC_ID, TP, ManagerFactory, ManualClock

from tierlog.log import LogConfig
from tierlog.protocol.records import Compression, scan_batches

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
