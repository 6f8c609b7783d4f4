"""Time to first byte on a segment the plugin has not touched since start: the manifest,
the indexes and chunk 0 are fetched concurrently, not manifest first.

A wrapper around the plugin's backend holds each GET until three are in flight at once
(or a deadline passes), and records which objects were in flight together and every GET.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.object_stores import KeyPairPaths
from tests.storage.objectstore.objectstore_helpers import (
    SameStoreBackend,
    encryption_props,
    finished,
    make_rsm,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.tiered.api import IndexType, RemoteLogSegmentMetadata

CHUNK = 64 * 1024


class TogetherBackend(SameStoreBackend):
    def __init__(self, inner: ObjectBackend, together: int = 3) -> None:
        super().__init__(inner)
        self._together = together
        self._cond = threading.Condition()
        self._in_flight: Counter[str] = Counter()
        self.seen_together: set[str] = set()
        self.gets: Counter[str] = Counter()

    def _enter(self, kind: str) -> None:
        with self._cond:
            self.gets[kind] += 1
            self._in_flight[kind] += 1
            kinds = set(+self._in_flight)
            if len(kinds) > len(self.seen_together):  # the most kinds in flight at once
                self.seen_together = kinds
            self._cond.notify_all()
            # hold until the others are in flight too; a read that issues them one after
            # the other gets past this only at the deadline, with fewer seen together
            self._cond.wait_for(lambda: sum(self._in_flight.values()) >= self._together, 2.0)

    def _leave(self, kind: str) -> None:
        with self._cond:
            self._in_flight[kind] -= 1
            self._together = 0  # once released, nothing more is held

    def get(self, key: str, object_type: str = "manifest") -> bytes:
        self._enter(object_type)
        try:
            return super().get(key, object_type)
        finally:
            self._leave(object_type)

    def get_range(self, key: str, start: int, end: int, object_type: str = "log") -> bytes:
        self._enter(object_type)
        try:
            return super().get_range(key, start, end, object_type)
        finally:
            self._leave(object_type)

    def get_range_view(
        self, key: str, start: int, end: int, object_type: str = "log", *rest: Any, **kw: Any
    ) -> memoryview:
        self._enter(object_type)
        try:
            return super().get_range_view(key, start, end, object_type, *rest, **kw)
        finally:
            self._leave(object_type)


def stored_segment(
    tmp_path: Path, extra: dict[str, str]
) -> tuple[dict[str, str], RemoteLogSegmentMetadata, bytes]:
    props = {
        "storage.url": f"file://{tmp_path}/remote",
        "chunk.size": str(CHUNK),
        "fetch.chunk.cache.class": "memory",
        **extra,
    }
    writer = make_rsm(props)
    lsd, data = segment_data(tmp_path / "seg", 6 * CHUNK)
    md = segment_metadata(len(data))
    md = finished(md, writer.copy_log_segment_data(md, lsd))
    writer.close()
    return props, md, data


def fresh(props: dict[str, str]) -> tuple[ObjectStoreRemoteStorageManager, TogetherBackend]:
    """A plugin as after a broker restart: nothing cached."""
    plugin = make_rsm(props)
    backend = TogetherBackend(plugin.backend)
    plugin.backend = backend
    return plugin, backend


@pytest.mark.parametrize("transforms", ["plain", "zstd+aes"])
def test_the_first_read_of_an_untouched_segment_gets_manifest_indexes_and_chunk_0_at_once(
    tmp_path: Path, transforms: str, rsa_key_pair: Callable[[str], KeyPairPaths]
) -> None:
    extra: dict[str, str] = {}
    if transforms == "zstd+aes":
        pair = rsa_key_pair("k1")
        ring = {"k1": (pair.public, pair.private)}
        extra = {"compression.enabled": "true", **encryption_props(ring, "k1")}
    props, md, data = stored_segment(tmp_path, extra)
    plugin, backend = fresh(props)
    try:
        # as the broker's reader does at a segment's first batch: the offset lookup runs
        # beside the stream's first chunk
        with ThreadPoolExecutor(1) as lookups:
            lookup = lookups.submit(lambda: plugin.fetch_index(md, IndexType.OFFSET).read())
            with plugin.fetch_log_segment(md, 0) as stream:
                assert stream.read(100) == data[:100]
            assert lookup.result()
        assert backend.seen_together == {"manifest", "indexes", "log"}
        assert plugin.fetch_index(md, IndexType.TIMESTAMP).read()  # from the same blob
        assert backend.gets["manifest"] == 1
        assert backend.gets["indexes"] == 1  # the whole blob: every index in one GET
        with plugin.fetch_log_segment(md, 0) as stream:
            assert stream.read() == data
        assert backend.gets["log"] == 6  # chunk 0 fetched once, early
    finally:
        plugin.close()


def test_a_lookup_gets_manifest_and_indexes_at_once_and_a_later_chunk_no_chunk_0(
    tmp_path: Path,
) -> None:
    props, md, data = stored_segment(tmp_path, {"fetch.chunk.cache.prefetch.max.size": "0"})
    plugin, backend = fresh(props)
    try:
        assert plugin.fetch_index(md, IndexType.OFFSET).read()  # the lookup comes first
        assert backend.seen_together == {"manifest", "indexes"}
        with plugin.fetch_log_segment(md, 3 * CHUNK) as stream:
            assert stream.read(10) == data[3 * CHUNK : 3 * CHUNK + 10]
        assert backend.gets["log"] == 1
    finally:
        plugin.close()


class ChunkZeroCountingBackend(SameStoreBackend):
    """Counts the GETs of the log object that start at its first byte (chunk 0's)."""

    def __init__(self, inner: ObjectBackend) -> None:
        super().__init__(inner)
        self.chunk_0_gets = 0
        self._lock = threading.Lock()

    def get_range_view(
        self, key: str, start: int, end: int, object_type: str = "log", *rest: Any, **kw: Any
    ) -> memoryview:
        if object_type == "log" and start == 0:
            with self._lock:
                self.chunk_0_gets += 1
        return super().get_range_view(key, start, end, object_type, *rest, **kw)


def test_a_reader_paused_before_claiming_chunk_0_does_not_fetch_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one fetch thread: a task queued behind the early GETs finishes after them
    props, md, data = stored_segment(tmp_path, {"fetch.thread.pool.size": "1"})
    plugin = make_rsm(props)
    backend = ChunkZeroCountingBackend(plugin.backend)
    plugin.backend = backend
    checked = threading.Event()
    resume = threading.Event()
    holds = plugin.manifest_cache.holds

    def holds_then_pause(key: str) -> bool:
        """The first reader sees the manifest absent, then is held before it claims."""
        answer = holds(key)
        if not checked.is_set():
            checked.set()
            assert resume.wait(10)
        return answer

    monkeypatch.setattr(plugin.manifest_cache, "holds", holds_then_pause)
    try:
        with ThreadPoolExecutor(1) as readers:
            first = readers.submit(lambda: plugin.fetch_log_segment(md, 0).read(100))
            assert checked.wait(10)
            # a second reader of the segment loads the manifest and uses the early chunk 0
            with plugin.fetch_log_segment(md, 0) as stream:
                assert stream.read(100) == data[:100]
            resume.set()
            assert first.result(10) == data[:100]
        plugin._fetch_pool.submit(lambda: None).result(10)
        assert backend.chunk_0_gets == 1
    finally:
        resume.set()
        plugin.close()
