"""The read-ahead pipeline, observed at the plugin's store boundary.

A reader with ``prefetch.max.size`` bytes in flight can go no faster than that amount per
GET round trip (Little's law), so the stream must keep its whole window of chunk GETs
outstanding while its consumer is slow, must not lose that concurrency to a small fetch
pool, and must never GET a chunk twice. The store is real (``file://``); a wrapper around
the plugin's backend holds chosen ranged GETs open and counts the ones in flight.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.poll import holds_for, wait_until
from tests.storage.objectstore.objectstore_helpers import (
    SameStoreBackend,
    finished,
    make_rsm,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.tiered.api import RemoteLogSegmentMetadata

CHUNK = 64 * 1024
WINDOW = 4  # chunks of read-ahead: prefetch.max.size = WINDOW * CHUNK


class GatedBackend(SameStoreBackend):
    """The plugin's backend with every ``.log`` ranged GET held until its chunk is let
    through; records the GETs issued and the most ever in flight at once."""

    def __init__(self, inner: ObjectBackend) -> None:
        super().__init__(inner)
        self._cond = threading.Condition()
        self._open: set[tuple[str, int]] = set()  # (key, chunk) allowed to complete
        self._everything = False
        self.issued: Counter[tuple[str, int]] = Counter()
        self.in_flight: set[tuple[str, int]] = set()
        self.max_in_flight = 0

    def get_range_view(
        self, key: str, start: int, end: int, object_type: str = "log"
    ) -> memoryview:
        chunk = (key, start // CHUNK)
        with self._cond:
            self.issued[chunk] += 1
            self.in_flight.add(chunk)
            self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
            self._cond.notify_all()
            ok = self._cond.wait_for(lambda: self._everything or chunk in self._open, 20.0)
        try:
            assert ok, f"GET of {chunk} never let through"
            return super().get_range_view(key, start, end, object_type)
        finally:
            with self._cond:
                self.in_flight.discard(chunk)

    def let_through(self, key: str, *chunks: int) -> None:
        with self._cond:
            self._open.update((key, c) for c in chunks)
            self._cond.notify_all()

    def open_all(self) -> None:
        with self._cond:
            self._everything = True
            self._cond.notify_all()

    def flying(self, key: str) -> set[int]:
        with self._cond:
            return {c for k, c in self.in_flight if k == key}


@pytest.fixture
def rsm(tmp_path: Path) -> Iterator[ObjectStoreRemoteStorageManager]:
    plugin = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": str(CHUNK),
            "fetch.chunk.cache.class": "disk",
            "fetch.chunk.cache.path": str(tmp_path / "chunk-cache"),
            "fetch.chunk.cache.prefetch.max.size": str(WINDOW * CHUNK),
            "fetch.thread.pool.size": "1",  # read-ahead must not depend on this pool
        }
    )
    yield plugin
    gated = plugin.backend
    if isinstance(gated, GatedBackend):
        gated.open_all()
    plugin.close()


def upload(
    rsm: ObjectStoreRemoteStorageManager, root: Path, chunks: int, seed: int = 1
) -> tuple[RemoteLogSegmentMetadata, bytes]:
    lsd, data = segment_data(root / f"seg{seed}", chunks * CHUNK, seed=seed)
    md = segment_metadata(len(data), start_offset=1000 * seed)
    return finished(md, rsm.copy_log_segment_data(md, lsd)), data


def gate(rsm: ObjectStoreRemoteStorageManager) -> GatedBackend:
    gated = GatedBackend(rsm.backend)
    rsm.backend = gated
    return gated


def test_a_slow_consumer_keeps_the_whole_window_of_gets_in_flight(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    md, data = upload(rsm, tmp_path, 12)
    gated = gate(rsm)
    key = rsm.open_segment(md).keys.log
    stream = rsm.fetch_log_segment(md, 0)
    gated.let_through(key, 0)
    assert stream.read(10) == data[:10]  # the consumer holds chunk 0 and reads no further

    wait_until(lambda: gated.flying(key) == {1, 2, 3, 4}, what="chunks 1-4 in flight")
    holds_for(lambda: gated.flying(key) == {1, 2, 3, 4}, 0.3, "no GET beyond the window")

    # a GET that completes is replaced at once, before the consumer gets to its chunk
    gated.let_through(key, 1, 2)
    wait_until(lambda: gated.flying(key) == {3, 4, 5, 6}, what="window moved to chunks 3-6")

    # loaded chunks pile up only to twice the window past the consumer's chunk
    gated.let_through(key, *range(3, 12))
    wait_until(lambda: set(gated.issued) == {(key, c) for c in range(9)}, what="chunks 0-8")
    holds_for(lambda: not gated.flying(key), 0.3, "nothing past chunk 8 while the consumer waits")
    assert (key, 9) not in gated.issued

    # the consumer reaches chunk 1: chunk 9 comes into reach
    assert stream.read(CHUNK) == data[10 : CHUNK + 10]
    wait_until(lambda: (key, 9) in gated.issued, what="chunk 9 once the consumer moved on")

    gated.open_all()
    assert stream.read() == data[CHUNK + 10 :]
    stream.close()
    # the chunk the consumer waits for plus the window behind it, never more
    assert gated.max_in_flight == WINDOW + 1
    assert set(gated.issued.values()) == {1}  # no chunk fetched twice
    assert len(gated.issued) == 12


def test_read_ahead_of_several_streams_does_not_queue_on_the_fetch_pool(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    # fetch.thread.pool.size is 1: three windows (12 GETs) must still all be in flight
    segments = [upload(rsm, tmp_path, 8, seed=s) for s in (1, 2, 3)]
    gated = gate(rsm)
    keys = [rsm.open_segment(md).keys.log for md, _ in segments]
    streams = []
    for (md, data), key in zip(segments, keys, strict=True):
        gated.let_through(key, 0)
        stream = rsm.fetch_log_segment(md, 0)
        assert stream.read(1) == data[:1]
        streams.append(stream)
    wait_until(
        lambda: all(gated.flying(k) == {1, 2, 3, 4} for k in keys),
        what="every stream's window in flight at once",
    )
    gated.open_all()
    for stream, (_md, data) in zip(streams, segments, strict=True):
        assert stream.read() == data[1:]
        stream.close()
    assert set(gated.issued.values()) == {1}


def test_warm_widened_step_by_step_fetches_each_chunk_once(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    md, data = upload(rsm, tmp_path, 8)
    gated = gate(rsm)
    key = rsm.open_segment(md).keys.log
    # a caller widening its window: each call overlaps the chunks already asked for
    assert rsm.warm(md, 0, CHUNK // 2) == 1
    assert rsm.warm(md, CHUNK // 2, CHUNK) == 1  # chunk 0 is loading: only chunk 1 is new
    assert rsm.warm(md, CHUNK, 2 * CHUNK) == 1
    wait_until(lambda: gated.flying(key) == {0, 1, 2}, what="chunks 0-2 warming")
    gated.open_all()
    wait_until(
        lambda: all((rsm.open_segment(md).cache_id, c) in rsm.chunk_cache for c in (0, 1, 2))
    )
    assert rsm.warm(md, 0, 3 * CHUNK) == 0  # all cached now
    with rsm.fetch_log_segment(md, 0) as stream:
        assert stream.read() == data
    assert set(gated.issued.values()) == {1}
    assert len(gated.issued) == 8


def test_warm_with_no_length_beyond_zero_loads_only_manifest_and_indexes(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    md, _data = upload(rsm, tmp_path, 4)
    rsm.manifest_cache.clear()
    gated = gate(rsm)
    assert rsm.warm(md, 0, 0) == 0
    seg = rsm.open_segment(md)
    assert rsm.keys_for(md).manifest in rsm.manifest_cache
    wait_until(
        lambda: all((seg.cache_id, t) in rsm.index_cache for t in (0, 1)),
        what="offset and time indexes warmed",
    )
    assert not gated.issued  # no chunk


def test_a_plain_chunk_is_served_from_the_clients_buffer_without_a_copy(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    md, data = upload(rsm, tmp_path, 2)
    seg = rsm.open_segment(md)
    loaded = rsm._load_chunk(seg, 1)
    # the client's receive buffer itself, not a bytes copy of it
    assert isinstance(loaded, memoryview) and loaded.obj is not None
    assert not isinstance(loaded.obj, bytes)
    assert loaded == data[CHUNK : 2 * CHUNK]


def test_streams_sharing_a_small_disk_cache_fetch_each_chunk_once(tmp_path: Path) -> None:
    # six cold readers at once, each with 2 chunks of read-ahead (4 loaded ahead at most):
    # 24 chunks loaded ahead fit the 32-chunk cache, so no unread chunk may be evicted to
    # make room while chunks already consumed by their sequential reader are kept
    plugin = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": str(CHUNK),
            "fetch.chunk.cache.class": "disk",
            "fetch.chunk.cache.path": str(tmp_path / "chunk-cache"),
            "fetch.chunk.cache.size": str(32 * CHUNK),
            "fetch.chunk.cache.prefetch.max.size": str(2 * CHUNK),
        }
    )
    try:
        segments = [upload(plugin, tmp_path, 12, seed=s) for s in range(1, 7)]
        counted = gate(plugin)
        counted.open_all()  # count only, hold nothing
        streams = [plugin.fetch_log_segment(md, 0) for md, _ in segments]
        got = [bytearray() for _ in segments]
        step = CHUNK // 4
        while any(len(g) < len(d) for g, (_, d) in zip(got, segments, strict=True)):
            for stream, g in zip(streams, got, strict=True):
                g.extend(stream.read(step))
        for stream in streams:
            stream.close()
        assert [bytes(g) for g in got] == [d for _, d in segments]
        twice = sorted(c for c, n in counted.issued.items() if n > 1)
        assert not twice, f"chunks fetched more than once: {twice}"
        assert len(counted.issued) == 6 * 12
    finally:
        plugin.close()


def test_without_a_chunk_cache_a_stopped_reader_holds_at_most_the_window(tmp_path: Path) -> None:
    # no cache: loaded read-ahead lives in the stream, so a parked reader must not pile up
    # twice the window in memory
    plugin = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": str(CHUNK),
            "fetch.chunk.cache.class": "none",
            "fetch.chunk.cache.prefetch.max.size": str(WINDOW * CHUNK),
        }
    )
    try:
        md, data = upload(plugin, tmp_path, 12)
        counted = gate(plugin)
        counted.open_all()
        stream = plugin.fetch_log_segment(md, 0)
        assert stream.read(10) == data[:10]  # the reader is in chunk 0 and stops
        wait_until(lambda: len(counted.issued) == 1 + WINDOW, what="the window loaded")
        holds_for(lambda: len(counted.issued) == 1 + WINDOW, 0.3, "nothing past the window")
        assert stream.read() == data[10:]
        stream.close()
        assert set(counted.issued.values()) == {1} and len(counted.issued) == 12
    finally:
        plugin.close()
