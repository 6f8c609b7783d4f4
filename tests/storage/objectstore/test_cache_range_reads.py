"""A disk-cache hit costs only the bytes the reader touches.

A consumer reads a 4 MiB chunk in 1 MiB Fetches; a hit maps the chunk file, where reading
the whole file back on every hit would make the cold path read 4x the bytes it serves.
"Bytes read" is measured with the kernel's own counter (``rchar`` in ``/proc/self/io``: bytes
this process got through read-like system calls, which a mapping does not use).
"""

from __future__ import annotations

import mmap
from pathlib import Path

from tests.storage.objectstore.objectstore_helpers import (
    MiB,
    finished,
    make_rsm,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore.cache import disk_chunk_cache


def _rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_disk_cache_hit_maps_the_file_instead_of_reading_it(tmp_path: Path) -> None:
    cache = disk_chunk_cache(tmp_path / "c", capacity_bytes=16 * MiB, ttl_seconds=60)
    data = bytes(range(256)) * (4 * MiB // 256)
    cache.get(("seg", 0), lambda: data)
    before = _rchar()
    hit = cache.get(("seg", 0), lambda: b"never")
    assert isinstance(hit, memoryview) and isinstance(hit.obj, mmap.mmap)
    assert hit[MiB : MiB + 4096] == data[MiB : MiB + 4096]
    assert _rchar() - before < MiB  # was >= 4 MiB: the whole file read back


def test_mapped_chunk_stays_readable_after_its_file_is_evicted(tmp_path: Path) -> None:
    cache = disk_chunk_cache(tmp_path / "c", capacity_bytes=1000, ttl_seconds=60)
    cache.get(("seg", 0), lambda: b"a" * 600)
    held = cache.get(("seg", 0), lambda: b"never")
    cache.invalidate(("seg", 0))  # as an eviction: its file is deleted
    assert ("seg", 0) not in cache
    assert list((tmp_path / "c").iterdir()) == []
    assert held == b"a" * 600


def test_an_empty_chunk_file_is_a_hit_of_no_bytes(tmp_path: Path) -> None:
    cache = disk_chunk_cache(tmp_path / "c", capacity_bytes=1000, ttl_seconds=60)
    cache.get(("seg", 0), lambda: b"")
    assert cache.get(("seg", 0), lambda: b"never") == b""


def test_rsm_reads_a_small_range_of_a_disk_cached_chunk_without_reading_the_chunk(
    tmp_path: Path,
) -> None:
    rsm = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": str(4 * MiB),
            "fetch.chunk.cache.class": "disk",
            "fetch.chunk.cache.path": str(tmp_path / "cache"),
            "fetch.chunk.cache.size": str(64 * MiB),
            "fetch.chunk.cache.prefetch.max.size": "0",
        }
    )
    try:
        lsd, data = segment_data(tmp_path / "seg", 8 * MiB, compressible=False)
        md = finished(segment_metadata(len(data)), None)
        md = finished(md, rsm.copy_log_segment_data(md, lsd))
        with rsm.fetch_log_segment(md, 0, 4 * MiB - 1) as warm:
            assert warm.read() == data[: 4 * MiB]  # chunk 0 now in the disk cache
        before = _rchar()
        with rsm.fetch_log_segment(md, MiB, MiB + 65535) as part:
            got = part.read()
        read = _rchar() - before
        assert got == data[MiB : MiB + 65536]
        assert read < MiB, f"a 64 KiB read of a cached chunk read {read} bytes"
    finally:
        rsm.close()
