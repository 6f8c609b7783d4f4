"""The two remote index caches: what each layer saves, measured on its own.

The broker's ``RemoteIndexCache`` (tiered.manager, on local disk, opened with the log's index
classes) sits on top of the object-store plugin's in-memory index cache (``index_cache``,
``fetch.indexes.cache.size``). This bench measures each layer against the same path with that
layer taken away, with the object store's round trip simulated by a sleep in the plugin's
backend (``--latency-ms``, 50 by default, as ``latency_proxy.py`` adds in the other benches):

(1) per-Fetch offset lookup, both caches warm: ``RemoteIndexCache.lookup_offset`` against
    what a reader without the manager layer does per Fetch: ``fetch_index`` (a hit in the
    plugin's cache) and a binary search over the returned bytes;
(2) a broker restart: the manager layer is rehydrated from disk (no GET), a plugin-only
    broker fetches each segment's offset and time indexes again (two GETs per segment);
(3) entering the next segment (a manager-cache miss): with the segment warmed through the
    plugin's ``warm`` (which lands the indexes in the plugin's cache) against the plugin's
    index cache turned off (``fetch.indexes.cache.size=0``: warming has nowhere to put them).

Segments carry indexes the size a 64 MiB segment has at ``index.interval.bytes=4096`` (16384
offset entries, 128 KiB; the time index likewise); their ``.log`` is small, since no step here
reads it.

Run: ``.venv/bin/python bench/bench_index_cache.py [--segments 8] [--latency-ms 50]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.tiered.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tierlog.tiered.manager.index_cache import RemoteIndexCache

ENTRIES = 16384  # a 64 MiB segment indexed every 4 KiB
STRIDE = 4096
TIP = TopicIdPartition(uuid.UUID(int=405), "bench", 0)


class SlowBackend:
    """The plugin's backend, each ranged GET delayed by the simulated round trip, counted."""

    def __init__(self, inner: Any, latency_s: float) -> None:
        self._inner = inner
        self._latency_s = latency_s
        self._lock = threading.Lock()
        self.gets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _round_trip(self) -> None:
        with self._lock:
            self.gets += 1
        time.sleep(self._latency_s)

    def get(self, key: str, object_type: str = "manifest") -> bytes:
        self._round_trip()
        return bytes(self._inner.get(key, object_type))

    def get_range(self, key: str, start: int, end: int, object_type: str = "log") -> bytes:
        self._round_trip()
        return bytes(self._inner.get_range(key, start, end, object_type))


def write_segment(d: Path, start: int) -> LogSegmentData:
    d.mkdir(parents=True)
    log = d / "seg.log"
    log.write_bytes(build_batch([SimpleRecord(b"x" * 1000)], base_offset=start))
    offsets = b"".join(struct.pack(">II", i + 1, (i + 1) * STRIDE) for i in range(ENTRIES))
    times = b"".join(struct.pack(">qI", 1_000 + i, i + 1) for i in range(ENTRIES))
    (d / "seg.index").write_bytes(offsets)
    (d / "seg.timeindex").write_bytes(times)
    (d / "seg.snapshot").write_bytes(b"")
    return LogSegmentData(log, d / "seg.index", d / "seg.timeindex", None, d / "seg.snapshot", b"")


def upload(
    rsm: ObjectStoreRemoteStorageManager, root: Path, n: int
) -> list[RemoteLogSegmentMetadata]:
    out = []
    for i in range(n):
        start = i * 100_000
        md = RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate_new(TIP), start, start + ENTRIES, 1_000, 0, 0,
            (ENTRIES + 1) * STRIDE, None, RemoteLogSegmentState.COPY_SEGMENT_STARTED, {0: start},
        )  # fmt: skip
        custom = rsm.copy_log_segment_data(md, write_segment(root / f"seg{i}", start))
        out.append(
            dataclasses.replace(
                md, state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED, custom_metadata=custom
            )
        )
    return out


def make_rsm(
    bucket: Path, latency_s: float, props: dict[str, str]
) -> ObjectStoreRemoteStorageManager:
    rsm = ObjectStoreRemoteStorageManager()
    rsm.configure({"storage.url": bucket.as_uri(), "encryption.enabled": "false", **props})
    rsm.backend = SlowBackend(rsm.backend, latency_s)  # type: ignore[assignment]
    return rsm


def plugin_only_lookup(
    rsm: ObjectStoreRemoteStorageManager, md: RemoteLogSegmentMetadata, offset: int
) -> int:
    """What a reader without the manager layer does per Fetch."""
    with rsm.fetch_index(md, IndexType.OFFSET) as f:
        data = f.read()
    target = offset - md.start_offset
    lo, hi, found = 0, len(data) // 8 - 1, -1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if struct.unpack_from(">I", data, mid * 8)[0] <= target:
            found, lo = mid, mid + 1
        else:
            hi = mid - 1
    return 0 if found < 0 else int(struct.unpack_from(">I", data, found * 8 + 4)[0])


def per_lookup_us(fn: Any, mds: list[RemoteLogSegmentMetadata], n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        md = mds[i % len(mds)]
        fn(md, md.start_offset + (i * 7919) % ENTRIES)
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--lookups", type=int, default=20_000)
    args = ap.parse_args(argv)
    latency_s = args.latency_ms / 1000
    with tempfile.TemporaryDirectory(prefix="bench-index-cache-") as tmp:
        root = Path(tmp)
        bucket = root / "bucket"
        rsm = make_rsm(bucket, 0.0, {})
        mds = upload(rsm, root / "src", args.segments)
        rsm.close()

        # (1) per-Fetch lookup, both layers warm
        rsm = make_rsm(bucket, latency_s, {})
        cache = RemoteIndexCache(root / "logs", rsm)
        for md in mds:
            cache.get_entry(md)
        for md in mds:
            plugin_only_lookup(rsm, md, md.start_offset)
        for md in mds:  # the same answers both ways
            for off in (md.start_offset, md.start_offset + 5000, md.start_offset + ENTRIES):
                assert cache.lookup_offset(md, off) == plugin_only_lookup(rsm, md, off)
        gets = rsm.backend.gets  # type: ignore[attr-defined]
        manager_us = statistics.median(
            per_lookup_us(cache.lookup_offset, mds, args.lookups) for _ in range(3)
        )
        plugin_us = statistics.median(
            per_lookup_us(lambda md, o: plugin_only_lookup(rsm, md, o), mds, args.lookups)
            for _ in range(3)
        )
        assert rsm.backend.gets == gets  # type: ignore[attr-defined]
        print(
            f"(1) per-Fetch offset lookup, both caches warm ({args.lookups} lookups, median of 3)"
        )
        print(f"    manager RemoteIndexCache:      {manager_us:8.1f} us/lookup")
        print(f"    plugin cache + search bytes:   {plugin_us:8.1f} us/lookup"
              f"   ({plugin_us / manager_us:.1f}x)")  # fmt: skip
        cache.close()
        rsm.close()

        # (2) restart: rehydrate from disk vs refetch through the plugin
        rsm = make_rsm(bucket, latency_s, {})
        t0 = time.perf_counter()
        cache = RemoteIndexCache(root / "logs", rsm)
        for md in mds:
            cache.lookup_offset(md, md.start_offset + 5000)
        rehydrated_s = time.perf_counter() - t0
        rehydrated_gets = rsm.backend.gets  # type: ignore[attr-defined]
        cache.close()
        rsm.close()
        rsm = make_rsm(bucket, latency_s, {})
        t0 = time.perf_counter()
        for md in mds:
            plugin_only_lookup(rsm, md, md.start_offset + 5000)
            rsm.fetch_index(md, IndexType.TIMESTAMP).close()
        refetch_s = time.perf_counter() - t0
        refetch_gets = rsm.backend.gets  # type: ignore[attr-defined]
        rsm.close()
        print(f"(2) first lookup in each of {len(mds)} segments after a restart")
        print(f"    manager cache rehydrated:      {rehydrated_s * 1000:8.1f} ms, "
              f"{rehydrated_gets} GETs")  # fmt: skip
        print(f"    plugin only (memory is gone):  {refetch_s * 1000:8.1f} ms, "
              f"{refetch_gets} GETs (manifests and indexes)")  # fmt: skip

        # (3) entering the next segment: warmed into the plugin's cache vs nowhere to warm to
        results: dict[str, list[float]] = {}
        for label, props in (
            ("plugin index cache on ", {"fetch.chunk.cache.class": "memory"}),
            ("plugin index cache off", {"fetch.chunk.cache.class": "memory",
                                        "fetch.indexes.cache.size": "0"}),
        ):  # fmt: skip
            rsm = make_rsm(bucket, latency_s, props)
            logs = root / f"logs-{label.split()[-1]}"
            cache = RemoteIndexCache(logs, rsm)
            times = []
            for md in mds:
                rsm.warm(md, 0, 0)  # what the reader does near the end of the previous one
                time.sleep(4 * latency_s)  # the rest of the previous segment is read meanwhile
                t0 = time.perf_counter()
                cache.lookup_offset(md, md.start_offset + 5000)
                times.append(time.perf_counter() - t0)
            results[label] = times
            cache.close()
            rsm.close()
        print(f"(3) entering a segment after warm(next, 0, 0), median of {len(mds)}")
        on = statistics.median(results["plugin index cache on "]) * 1000
        off = statistics.median(results["plugin index cache off"]) * 1000
        print(f"    plugin index cache on:         {on:8.1f} ms")
        print(f"    plugin index cache off:        {off:8.1f} ms   ({off / max(on, 1e-3):.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
