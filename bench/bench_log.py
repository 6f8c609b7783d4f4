"""Log-engine throughput: append and read of 16 KiB batches of 1 KiB records.

Each operation is compared with raw file I/O of the same bytes in the same run (same disk,
same page cache state), so the table shows the engine's own overhead. The budget this tracks
is the broker-wide target of <= 2 CPU-s per GiB produced and <= 0.7 CPU-s per GiB consumed.

Run: ``.venv/bin/python bench/bench_log.py [--mib 512] [--dir /tmp]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tierlog.log import LogConfig, LogManager, TopicPartition
from tierlog.protocol.records import SimpleRecord, build_batch

RECORD = 1024
BATCH = 16 * 1024
FETCH = 1024 * 1024


def measure(fn: Callable[[], int]) -> tuple[float, float, int]:
    """(wall s, CPU s, bytes) for one call of ``fn``."""
    w0, c0 = time.perf_counter(), time.process_time()
    n = fn()
    return time.perf_counter() - w0, time.process_time() - c0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=512, help="data volume per run")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_log_", dir=args.dir))
    try:
        run(root, args.mib)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(root: Path, mib: int) -> None:
    per_batch = BATCH // RECORD
    proto = build_batch(
        [SimpleRecord(os.urandom(RECORD), b"k%d" % i) for i in range(per_batch)],
        timestamp=int(time.time() * 1000),
    )
    count = mib * 1024 * 1024 // len(proto)
    total = count * len(proto)

    raw_path = root / "raw.bin"

    def raw_write() -> int:
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(count):
                os.write(fd, proto)
        finally:
            os.close(fd)
        return total

    def raw_read() -> int:
        fd = os.open(raw_path, os.O_RDONLY)
        n = pos = 0
        try:
            while pos < total:
                chunk = os.pread(fd, FETCH, pos)
                pos += len(chunk)
                n += len(chunk)
        finally:
            os.close(fd)
        return n

    mgr = LogManager([root / "logs"], LogConfig())
    mgr.load()
    part = mgr.create_log(TopicPartition("bench", 0), uuid.uuid4())

    def log_append() -> int:
        for _ in range(count):
            part.append_as_leader(proto, leader_epoch=0)
        return total

    def log_read() -> int:
        offset, n = 0, 0
        end = part.log_end_offset
        while offset < end:
            data = part.read(offset, FETCH)
            n += data.size
            offset += (data.size // len(proto)) * per_batch
        return n

    rows = [
        ("raw write", *measure(raw_write)),
        ("log append", *measure(log_append)),
        ("raw read (1 MiB pread)", *measure(raw_read)),
        ("log read (1 MiB fetch)", *measure(log_read)),
    ]
    mgr.shutdown()
    gib = total / 2**30
    print(f"{count} batches of {len(proto)} B ({per_batch} x {RECORD} B records), {gib:.2f} GiB")
    print(f"{'operation':<24} {'MB/s':>9} {'wall s':>8} {'CPU s':>7} {'CPU s/GiB':>10}")
    for name, wall, cpu, n in rows:
        assert n == total, f"{name}: moved {n} of {total} bytes"
        print(f"{name:<24} {n / wall / 1e6:>9.0f} {wall:>8.2f} {cpu:>7.2f} {cpu / gib:>10.2f}")


if __name__ == "__main__":
    main()
