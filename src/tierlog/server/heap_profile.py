"""Opt-in heap growth reports for soak runs (``TIERLOG_HEAP_PROFILE_DIR``).

An RSS slope alone cannot tell a leak from state that legitimately grows with the data
(remote segment metadata, filling caches). With the variable set, the broker traces Python
allocations from start-up and, every ``TIERLOG_HEAP_PROFILE_INTERVAL_S`` seconds (default
60), writes the allocation sites that grew most since the first report to
``heap-<n>.txt`` in that directory. Tracing costs CPU, so it is never on by default.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tracemalloc
from pathlib import Path

log = logging.getLogger(__name__)

ENV_DIR = "TIERLOG_HEAP_PROFILE_DIR"
ENV_INTERVAL = "TIERLOG_HEAP_PROFILE_INTERVAL_S"
TOP = 40


def requested() -> Path | None:
    raw = os.environ.get(ENV_DIR)
    return Path(raw) if raw else None


async def run(out_dir: Path) -> None:
    """Report forever (the broker cancels the task on shutdown)."""
    interval = float(os.environ.get(ENV_INTERVAL, "60"))
    out_dir.mkdir(parents=True, exist_ok=True)
    if not tracemalloc.is_tracing():
        tracemalloc.start(4)
    log.warning("heap profiling on: reports every %.0f s in %s", interval, out_dir)
    first: tracemalloc.Snapshot | None = None
    n = 0
    while True:
        await asyncio.sleep(interval)
        snap = await asyncio.to_thread(tracemalloc.take_snapshot)
        if first is None:
            first = snap
        n += 1
        await asyncio.to_thread(_write, out_dir / f"heap-{n:03d}.txt", first, snap)


def _write(path: Path, first: tracemalloc.Snapshot, snap: tracemalloc.Snapshot) -> None:
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"traced current={current} peak={peak}"]
    for stat in snap.compare_to(first, "traceback")[:TOP]:
        lines.append(f"{stat.size_diff:+d} B in {stat.count_diff:+d} blocks (now {stat.size} B)")
        lines.extend(f"    {frame}" for frame in stat.traceback.format())
    path.write_text("\n".join(lines) + "\n")
