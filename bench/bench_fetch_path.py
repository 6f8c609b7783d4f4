"""Event-loop CPU per Fetch: a remote read answered on the loop against a local (hot) read
of the same batches, in one process, with no network and no other process beside it.

``bench_cold_read`` measures the whole broker under kcat, where the two shared cores make
the CPU figures move by ±10 % from run to run; the part of a cold Fetch that runs on the
event loop is hidden in them. Here a sequential reader's Fetches go straight to the two
read paths the Fetch handler calls, and the thread CPU of each call is counted
(``time.thread_time``), so a change to either path shows as microseconds per Fetch:

* **hot**: ``PartitionLog.read`` of a local log (the ``pread`` of the bytes, the index
  lookup, the batch walk);
* **remote, on the loop**: ``RemoteLogManager.read_remote`` of the same batches tiered to
  the object-store plugin on ``file://``, every chunk already in memory (the memory chunk
  cache, read-ahead landed between rounds), so each Fetch after a round's first is
  answered from the parked stream (``RemoteReader.read_ready``): the checks and the CRC of
  the served batches, the cursor, the read-ahead and warming calls, the metrics;
* **baseline**: the CRC check alone of the bytes each remote Fetch served
  (``valid_batches_prefix``), the one per-byte cost of the remote path that the hot path
  does not have (its batches were checked when appended).

Fetches ask for ``--fetch-kib`` (kcat's 1 MiB per partition by default) over batches of
``--batch-kib``; read_committed (librdkafka's default) and read_uncommitted both.

    .venv/bin/python bench/bench_fetch_path.py [--mib 48] [--batch-kib 1024] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.manual_rlm import log_of_sealed_segments, tier_everything
from tierlog.log import PartitionLog
from tierlog.protocol.records import scan_batches, valid_batches_prefix
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.tiered.api import TopicIdPartition
from tierlog.tiered.manager import RemoteFetchRequest, RemoteLogManager

MiB = 1 << 20
KiB = 1 << 10
BATCH_OVERHEAD = 100  # bytes of a one-record batch beyond its value, about


def _last_offset(records: bytes | memoryview) -> int:
    last = -1
    for h in scan_batches(memoryview(records)):
        last = h.last_offset
    return last


def _tiered(root: Path, segments: list[int], value: int) -> tuple[PartitionLog, RemoteLogManager]:
    tip = TopicIdPartition(uuid.UUID(int=1), "remote", 0)
    lg = log_of_sealed_segments(root / "logs", tip, segments, value_bytes=value, seed=1)
    rsm = ObjectStoreRemoteStorageManager()
    rsm.configure(
        {
            "storage.url": (root / "bucket").as_uri(),
            "chunk.size": str(4 * MiB),
            "fetch.chunk.cache.class": "memory",
            "fetch.chunk.cache.size": str(2 * sum(segments)),
            "fetch.chunk.cache.prefetch.max.size": str(64 * MiB),
        }
    )
    return lg, tier_everything(lg, rsm, tip, root / "logs")


async def _remote_round(
    lg: PartitionLog, rlm: RemoteLogManager, fetch: int, committed: bool
) -> tuple[list[float], list[float]]:
    """One sequential pass over the remote range: per Fetch answered on the loop, the
    thread CPU of ``read_remote`` and of the CRC check alone of what it served."""
    reads: list[float] = []
    crcs: list[float] = []
    offset = lg.log_start_offset
    while offset < lg.local_log_start_offset:
        req = RemoteFetchRequest(lg, offset, fetch, True, committed)
        before = _ready(rlm)
        started = time.thread_time()
        (res,) = await rlm.read_remote([req], fetch)
        took = time.thread_time() - started
        if not res.records:
            raise RuntimeError(f"remote read at {offset}: {res.error} {res.error_message}")
        if _ready(rlm) > before:  # answered on the loop, not by the reader pool
            reads.append(took)
            started = time.thread_time()
            valid_batches_prefix(res.records, 0, 1 << 62)
            crcs.append(time.thread_time() - started)
        offset = _last_offset(res.records) + 1
    return reads, crcs


def _ready(rlm: RemoteLogManager) -> float:
    return rlm.metrics.value("tierlog_remote_fetch_ready_total", topic="remote", partition="0")


def _hot_round(lg: PartitionLog, fetch: int) -> list[float]:
    reads: list[float] = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        started = time.thread_time()
        data = lg.read(offset, fetch, True, "leo")
        reads.append(time.thread_time() - started)
        if not data.size:
            break
        offset = _last_offset(data.to_bytes()) + 1
    return reads


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mib", type=int, default=48, help="bytes tiered, in two segments")
    ap.add_argument("--batch-kib", type=int, default=1024, help="one record per batch")
    ap.add_argument("--fetch-kib", type=int, default=1024, help="bytes a Fetch asks for")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-fetch-path-"))
    value = args.batch_kib * KiB - BATCH_OVERHEAD
    half = args.mib * MiB // 2
    fetch = args.fetch_kib * KiB
    try:
        lg, rlm = _tiered(root / "tiered", [half, half], value)
        hot = log_of_sealed_segments(
            root / "hot",
            TopicIdPartition(uuid.UUID(int=2), "hot", 0),
            [half, half],
            value_bytes=value,
            seed=1,
        )
        # the paths take turns, round by round: this machine's pace drifts over seconds
        results: dict[str, list[float]] = {
            "remote": [],
            "remote, read_committed": [],
            "CRC check of the same bytes (baseline)": [],
            "hot (local log read)": [],
        }
        for _ in range(args.rounds):
            for committed in (False, True):
                r, c = asyncio.run(_remote_round(lg, rlm, fetch, committed))
                results["remote, read_committed" if committed else "remote"] += r
                if not committed:
                    results["CRC check of the same bytes (baseline)"] += c
                time.sleep(0.3)  # the read-ahead of the round's new streams lands
            results["hot (local log read)"] += _hot_round(hot, fetch)
        hot_reads = results["hot (local log read)"]
        ready = _ready(rlm)
        asked = rlm.metrics.value(
            "tierlog_remote_fetch_requests_total", topic="remote", partition="0"
        )
        rlm.close()
        lg.close()
        hot.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"== {args.mib} MiB in batches of {args.batch_kib} KiB, Fetches of {args.fetch_kib} KiB, "
        f"{args.rounds} rounds; remote reads answered on the loop: {ready:.0f} of {asked:.0f}"
    )
    print("| path | Fetches | median µs per Fetch | mean |")
    print("|---|---:|---:|---:|")
    for name, values in results.items():
        print(
            f"| {name} | {len(values)} | {statistics.median(values) * 1e6:.0f} "
            f"| {statistics.mean(values) * 1e6:.0f} |"
        )
    remote = statistics.median(results["remote"])
    crc = statistics.median(results["CRC check of the same bytes (baseline)"])
    hot_median = statistics.median(hot_reads)
    print(
        f"remote / hot: {remote / hot_median:.2f}x; remote without its CRC check / hot: "
        f"{(remote - crc) / hot_median:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
