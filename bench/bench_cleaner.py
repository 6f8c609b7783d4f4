"""Log cleaner throughput and memory: MB/s of dirty log cleaned, and peak RSS per map size.

A compacted partition gets ``--mib`` of 16-record batches (``--value`` byte values over
``--keys`` distinct keys, so most records are superseded), in 64 MiB segments, then one
active segment. In the same run, as a baseline, the same segment files are read whole and
written to a new file with an fsync (raw read + raw write of the same bytes). The cleaner
then cleans the log on the calling thread until nothing is dirty (several passes when the
offset map is too small for the keys). Each ``--dedupe`` size runs in a child process so
its peak RSS (``VmHWM``) is its own. MB per CPU-second is reported beside MB/s because the
cleaner is CPU-bound and wall time on a shared machine measures the other load too.

Run: ``.venv/bin/python bench/bench_cleaner.py [--mib 128] [--keys 200000]
[--dedupe 8388608,134217728]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tierlog.log import LogConfig, LogManager, TopicPartition
from tierlog.log.cleaner.config import CleanerConfig
from tierlog.protocol.records import Compression, SimpleRecord, build_batch

TP = TopicPartition("bench-compacted", 0)
PER_BATCH = 16


def _peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _fill(data_dir: Path, mib: int, keys: int, value: int, codec: Compression) -> int:
    cfg = LogConfig(
        cleanup_policy=("compact",), segment_bytes=64 << 20, min_cleanable_dirty_ratio=0.0
    )
    mgr = LogManager([data_dir], cfg)
    mgr.load()
    plog = mgr.create_log(TP, uuid.uuid4(), cfg)
    written = 0
    i = 0
    payload = os.urandom(value)
    while written < mib << 20:
        recs = [
            SimpleRecord(payload, b"key-%09d" % ((i + n) * 7919 % keys)) for n in range(PER_BATCH)
        ]
        batch = build_batch(recs, timestamp=int(time.time() * 1000), compression=codec)
        plog.append_as_leader(batch, 0)
        written += len(batch)
        i += PER_BATCH
    plog.roll()
    mgr.shutdown()
    return written


def _raw_copy(part_dir: Path, out: Path) -> tuple[float, int]:
    start = time.perf_counter()
    total = 0
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for log_file in sorted(part_dir.glob("*.log")):
            data = log_file.read_bytes()
            total += len(data)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start, total


def child(data_dir: Path, dedupe: int) -> None:
    """Clean the log in ``data_dir`` to the end; print a JSON line of figures."""
    mgr = LogManager([data_dir], LogConfig())
    cfg = LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=64 << 20,
        min_cleanable_dirty_ratio=0.0,
        file_delete_delay_ms=0,
    )
    mgr.load({TP.topic: cfg})
    plog = mgr.get_log(TP)
    assert plog is not None
    before = plog.size
    cleaner = mgr.start_cleaner(CleanerConfig(enable=False, dedupe_buffer_size=dedupe))
    worker = cleaner._new_cleaner()
    rss_before = _peak_rss_mib()
    start = time.perf_counter()
    cpu = time.process_time()
    passes = 0
    while cleaner.clean_once(worker):
        passes += 1
    wall = time.perf_counter() - start
    print(
        json.dumps(
            {
                "dedupe": dedupe,
                "passes": passes,
                "wall_s": wall,
                "cpu_s": time.process_time() - cpu,
                "bytes_before": before,
                "bytes_after": plog.size,
                "rss_before_mib": rss_before,
                "peak_rss_mib": _peak_rss_mib(),
                "uncleanable": len(cleaner.uncleanable_partitions),
                "checkpoint": cleaner.checkpointed_offset(TP),
                "end": plog.segments()[-1].base_offset,
            }
        )
    )
    mgr.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--codec", default="none", choices=["none", "gzip", "lz4", "zstd"])
    ap.add_argument("--dedupe", default=f"{8 << 20},{128 << 20}")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(Path(args.child), int(args.dedupe))
        return
    codec = Compression[args.codec.upper()]
    base = Path(tempfile.mkdtemp(prefix="bench-cleaner-", dir=args.dir))
    try:
        template = base / "template"
        written = _fill(template, args.mib, args.keys, args.value, codec)
        part_dir = template / f"{TP.topic}-{TP.partition}"
        raw_s, raw_bytes = _raw_copy(part_dir, base / "raw-copy")
        mb = raw_bytes / 1e6
        print(
            f"dirty log: {written / 1e6:.0f} MB, {args.keys} keys, {args.value} B values, "
            f"codec {args.codec}"
        )
        print("| run | passes | MB/s | MB per CPU-s | wall s | CPU s | kept % | peak RSS MiB |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        print(
            f"| raw read + raw write (baseline) | - | {mb / raw_s:.0f} | - | {raw_s:.2f} | - "
            "| - | - |"
        )
        for size in [int(s) for s in args.dedupe.split(",")]:
            run_dir = base / f"run-{size}"
            shutil.copytree(template, run_dir)
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(run_dir), "--dedupe", str(size)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(
                f"| cleaner, dedupe {size >> 20} MiB | {r['passes']} | "
                f"{r['bytes_before'] / 1e6 / r['wall_s']:.1f} | "
                f"{r['bytes_before'] / 1e6 / r['cpu_s']:.1f} | {r['wall_s']:.2f} | "
                f"{r['cpu_s']:.2f} | {100 * r['bytes_after'] / r['bytes_before']:.1f} | "
                f"{r['peak_rss_mib']:.0f} |"
            )
            shutil.rmtree(run_dir)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
