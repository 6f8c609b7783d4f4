"""The plugin on Azure (Azurite), bounded upload memory, and concurrent readers."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.storage.objectstore.objectstore_helpers import (
    MiB,
    encryption_props,
    finished,
    make_rsm,
    poll_until,
    segment_data,
    segment_metadata,
)
from tierlog.tiered.api import IndexType


def test_round_trip_on_azurite(
    tmp_path: Path, azure_container: dict[str, str], rsa_key_pair: Callable[[str], Any]
) -> None:
    pair = rsa_key_pair("azure")
    rsm = make_rsm(
        azure_container
        | {
            "chunk.size": str(MiB),
            "upload.part.size": str(5 * MiB),
            "compression.enabled": "true",
        }
        | encryption_props({"a": (pair.public, pair.private)}, "a")
    )
    lsd, data = segment_data(tmp_path / "seg", 11 * MiB + 5)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    assert rsm.fetch_log_segment(stored, 0).read() == data
    assert (
        rsm.fetch_log_segment(stored, 3 * MiB - 2, 3 * MiB + 2).read()
        == data[3 * MiB - 2 : 3 * MiB + 3]
    )
    assert rsm.fetch_index(stored, IndexType.TIMESTAMP).read() == lsd.time_index.read_bytes()
    rsm.delete_log_segment_data(stored)
    rsm.delete_log_segment_data(stored)
    assert list(rsm.backend.list_objects("tiered/")) == []
    rsm.close()


def test_upload_memory_does_not_grow_with_segment_size(tmp_path: Path) -> None:
    """Python-side allocations while copying a 48 MiB segment in 1 MiB chunks stay at a
    few chunks (transform read-ahead), far below the segment size."""
    rsm = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": str(MiB),
            "upload.part.size": str(2 * MiB),
            "upload.max.concurrency": "2",
            "compression.enabled": "true",
        }
    )
    lsd, data = segment_data(tmp_path / "seg", 48 * MiB, compressible=False)
    del data
    md = segment_metadata(48 * MiB)
    tracemalloc.start()
    try:
        rsm.copy_log_segment_data(md, lsd)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 * MiB, peak
    rsm.close()


def test_concurrent_readers_of_one_segment_fetch_each_chunk_once(tmp_path: Path) -> None:
    rsm = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": "65536",
            "fetch.chunk.cache.prefetch.max.size": str(4 * 65536),
        }
    )
    lsd, data = segment_data(tmp_path / "seg", 40 * 65536)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    rsm.backend.request_counts.clear()
    results: list[bool] = []

    def read() -> None:
        results.append(rsm.fetch_log_segment(stored, 0).read() == data)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [True] * 6
    assert rsm.backend.request_counts["get_range"] == 40
    rsm.close()


def test_warm_prefetches_a_segment_into_the_chunk_cache(tmp_path: Path) -> None:
    rsm = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": "65536",
            "fetch.chunk.cache.prefetch.max.size": "0",
        }
    )
    lsd, data = segment_data(tmp_path / "seg", 8 * 65536)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    assert rsm.warm(stored, 0, 4 * 65536) == 4
    poll_until(lambda: rsm.chunk_cache.stats.prefetch_loads >= 4, what="prefetch")
    rsm.backend.request_counts.clear()
    assert rsm.fetch_log_segment(stored, 0, 4 * 65536 - 1).read() == data[: 4 * 65536]
    assert rsm.backend.request_counts["get_range"] == 0
    assert rsm.chunk_cache.stats.prefetch_hits == 4
    rsm.close()


def test_file_url_with_escaped_characters(tmp_path: Path) -> None:
    root = tmp_path / "remote tier"
    rsm = make_rsm({"storage.url": root.as_uri()})
    lsd, data = segment_data(tmp_path / "seg", 1000)
    md = segment_metadata(len(data))
    rsm.copy_log_segment_data(md, lsd)
    assert len(list(root.rglob("*.log"))) == 1
    rsm.close()
