"""The read-ahead pipeline, observed at the plugin's store boundary.

Each stream keeps a window of chunks loaded or in flight past its reader's chunk and sizes
it from what it measures (docs/read-ahead.md): it grows while a fast consumer waits for the
store and shrinks to what a slow consumer drains per GET; all streams together hold at most
the broker-wide budget; a reader that stops leaves at most one window fetched and unread;
no chunk is ever fetched twice; a read's first chunk is fetched alone, read-ahead after it.
The store is real (``file://``); wrappers around the
plugin's backend hold chosen ranged GETs open, or delay every GET, and count the GETs.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
from tierlog.storage.objectstore.window import INITIAL_AHEAD, SLOW_START_GROWTH
from tierlog.tiered.api import RemoteLogSegmentMetadata, SupportsReadView, TopicIdPartition

CHUNK = 64 * 1024
WINDOW = 4  # chunks of read-ahead: prefetch.max.size = WINDOW * CHUNK
#: Read-ahead chunks of a new stream under that cap.
START = min(INITIAL_AHEAD, WINDOW)
TIP = TopicIdPartition(uuid.UUID(int=227), "ahead", 0)


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

    def get_range_view(self, key: str, start: int, end: int, *rest: Any, **kw: Any) -> memoryview:
        chunk = (key, start // CHUNK)
        with self._cond:
            self.issued[chunk] += 1
            self.in_flight.add(chunk)
            self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
            self._cond.notify_all()
            ok = self._cond.wait_for(lambda: self._everything or chunk in self._open, 20.0)
        try:
            assert ok, f"GET of {chunk} never let through"
            return super().get_range_view(key, start, end, *rest, **kw)
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
    rsm: ObjectStoreRemoteStorageManager,
    root: Path,
    chunks: int,
    seed: int = 1,
    tip: TopicIdPartition | None = None,
) -> tuple[RemoteLogSegmentMetadata, bytes]:
    lsd, data = segment_data(root / f"seg{seed}", chunks * CHUNK, seed=seed)
    md = segment_metadata(len(data), start_offset=1000 * seed, tip=tip)
    return finished(md, rsm.copy_log_segment_data(md, lsd)), data


def gate(rsm: ObjectStoreRemoteStorageManager) -> GatedBackend:
    gated = GatedBackend(rsm.backend)
    rsm.backend = gated
    return gated


class DelayedBackend(SameStoreBackend):
    """The plugin's backend with every ``.log`` ranged GET taking ``latency`` seconds (an
    object store's first-byte time); counts the GETs, their bytes, and the most in flight,
    split into read-ahead GETs (on the plugin's read-ahead pool) and the readers' own."""

    def __init__(self, inner: ObjectBackend, latency: float) -> None:
        super().__init__(inner)
        self.latency = latency
        self._lock = threading.Lock()
        self.issued: Counter[tuple[str, int]] = Counter()
        self.ahead_issued: Counter[str] = Counter()
        self.fetched = 0
        self.in_flight = 0
        self.ahead_in_flight = 0
        self.max_in_flight = 0
        self.max_ahead_in_flight = 0

    def get_range_view(self, key: str, start: int, end: int, *rest: Any, **kw: Any) -> memoryview:
        ahead = threading.current_thread().name.startswith("tierlog-rsm-ahead")
        with self._lock:
            self.issued[(key, start // CHUNK)] += 1
            self.ahead_issued[key] += ahead
            self.in_flight += 1
            self.ahead_in_flight += ahead
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.max_ahead_in_flight = max(self.max_ahead_in_flight, self.ahead_in_flight)
        try:
            threading.Event().wait(self.latency)  # the store's latency, not a synchronisation
            view = super().get_range_view(key, start, end, *rest, **kw)
            with self._lock:
                self.fetched += len(view)
            return view
        finally:
            with self._lock:
                self.in_flight -= 1
                self.ahead_in_flight -= ahead

    def reset_peaks(self) -> None:
        with self._lock:
            self.max_in_flight = self.in_flight
            self.max_ahead_in_flight = self.ahead_in_flight


class SteppedClock:
    """The read-ahead budget's clock, moved on by the test alone: whether a stream is idle
    is the test's decision, not how long a loaded machine takes between two lines."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


#: ``adaptive_rsm``'s keyword for the per-stream cap, ``fetch.chunk.cache.prefetch.max.size``.
PREFETCH_MAX = "fetch_chunk_cache_prefetch_max_size"


def adaptive_rsm(tmp_path: Path, **extra: str) -> ObjectStoreRemoteStorageManager:
    return make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": str(CHUNK),
            "fetch.chunk.cache.class": "disk",
            "fetch.chunk.cache.path": str(tmp_path / "chunk-cache"),
            "fetch.chunk.cache.size": str(256 * CHUNK),
            "fetch.chunk.cache.prefetch.max.size": str(8 * CHUNK),
            **{k.replace("_", "."): v for k, v in extra.items()},
        }
    )


def test_the_window_grows_under_a_fast_consumer_and_shrinks_under_a_slow_one(
    tmp_path: Path,
) -> None:
    # a cap above where a new stream starts, so that there is room to grow
    plugin = adaptive_rsm(tmp_path, **{PREFETCH_MAX: str(2 * INITIAL_AHEAD * CHUNK)})
    try:
        first, data1 = upload(plugin, tmp_path, 32, seed=1, tip=TIP)
        # long enough to halve from the cap down to D, an epoch of the window's size each,
        # after the epoch that holds the new stream's first chunk (loaded before read-ahead)
        slow_chunks = 6 * INITIAL_AHEAD
        second, data2 = upload(plugin, tmp_path, slow_chunks, seed=2, tip=TIP)
        store = DelayedBackend(plugin.backend, latency=0.03)
        plugin.backend = store

        # a consumer that never keeps the reader waiting: each chunk it waits for is the
        # store's doing, so the window doubles while throughput still grows
        with plugin.fetch_log_segment(first, 0) as stream:
            assert stream.read() == data1
        fast_window = plugin.read_ahead_window(TIP)
        assert fast_window >= 2 * INITIAL_AHEAD * CHUNK
        assert store.max_ahead_in_flight > INITIAL_AHEAD  # more GETs at once than at start

        # the partition's next segment, read by a consumer three times slower than a GET:
        # it starts from that window and shrinks to what the consumer drains per GET
        store.reset_peaks()
        got = bytearray()
        with plugin.fetch_log_segment(second, 0) as stream:
            for i in range(slow_chunks):
                got += stream.read(CHUNK)
                if i == slow_chunks - 4:
                    store.reset_peaks()  # from here on: the shrunk window only
                threading.Event().wait(0.09)  # the consumer's own time per chunk
            assert bytes(got) == data2
            slow_window = plugin.read_ahead_window(TIP)
        # D = ceil(GET time / consumer time) + 1 = 2 (3 with this machine's load)
        assert slow_window <= 3 * CHUNK < fast_window
        assert store.max_ahead_in_flight <= 3
        assert set(store.issued.values()) == {1}  # no chunk fetched twice
    finally:
        plugin.close()


def test_a_consumer_that_stops_half_way_leaves_at_most_one_window_unread(tmp_path: Path) -> None:
    plugin = adaptive_rsm(tmp_path)
    try:
        md, data = upload(plugin, tmp_path, 32, tip=TIP)
        store = DelayedBackend(plugin.backend, latency=0.01)
        plugin.backend = store
        stream = plugin.fetch_log_segment(md, 0)
        consumed = stream.read(16 * CHUNK)  # then the consumer is gone
        assert consumed == data[: 16 * CHUNK]
        wait_until(lambda: store.in_flight == 0, what="read-ahead settled")
        holds_for(lambda: store.in_flight == 0, 0.2, "no GET after the consumer stopped")
        window = plugin.read_ahead_window(TIP)
        wasted = store.fetched - len(consumed)
        assert 0 < wasted <= window < 16 * CHUNK
        stream.close()
    finally:
        plugin.close()


def test_chunks_found_warmed_do_not_count_as_gets_for_the_window(tmp_path: Path) -> None:
    """The law's ``L`` is the time of a GET. A stream entering a segment that warming has
    already cached finds its chunks at once; taken as GETs, those would pull ``L`` towards
    zero and the window, sized to hide one GET, would collapse just before the reader
    reaches the chunks it must fetch."""
    latency = 0.05
    plugin = adaptive_rsm(tmp_path)
    try:
        warmed, warmed_data = upload(plugin, tmp_path, 8, seed=1, tip=TIP)
        fresh, fresh_data = upload(plugin, tmp_path, 8, seed=2, tip=TIP)
        store = DelayedBackend(plugin.backend, latency=latency)
        plugin.backend = store
        plugin.warm(warmed, 0, warmed.segment_size_in_bytes)
        wait_until(lambda: len(store.issued) == 8 and store.in_flight == 0, what="warmed")

        stream = plugin.fetch_log_segment(warmed, 0)
        assert stream.read() == warmed_data
        stream.close()
        assert len(store.issued) == 8  # every chunk came from the cache
        law = plugin._laws[TIP]
        assert law.get_s is None  # no GET measured, so no latency learned

        stream = plugin.fetch_log_segment(fresh, 0)
        assert stream.read() == fresh_data
        wait_until(lambda: store.in_flight == 0, what="read-ahead settled")
        stream.close()
        law = plugin._laws[TIP]
        assert law.get_s is not None and law.get_s >= latency  # the store's GETs, measured
    finally:
        plugin.close()


def read_at_once(
    plugin: ObjectStoreRemoteStorageManager,
    segments: list[tuple[RemoteLogSegmentMetadata, bytes]],
    step: int,
) -> list[bytes]:
    """Every segment read whole, ``step`` bytes per call, by one thread per segment at once."""

    def read_all(md: RemoteLogSegmentMetadata) -> bytes:
        with plugin.fetch_log_segment(md, 0) as stream:
            out = bytearray()
            while part := stream.read(step):
                out += part
            return bytes(out)

    with ThreadPoolExecutor(len(segments)) as readers:
        return list(readers.map(read_all, [md for md, _ in segments]))


def test_sixteen_streams_never_hold_more_than_the_budget(tmp_path: Path) -> None:
    budget_chunks = 12
    plugin = adaptive_rsm(
        tmp_path, fetch_chunk_cache_prefetch_total_max_size=str(budget_chunks * CHUNK)
    )
    try:
        segments = [upload(plugin, tmp_path, 10, seed=s) for s in range(1, 17)]
        store = DelayedBackend(plugin.backend, latency=0.02)
        plugin.backend = store
        assert read_at_once(plugin, segments, CHUNK // 2) == [data for _, data in segments]
        budget = plugin.read_ahead_budget
        assert 0 < budget.peak <= budget_chunks * CHUNK
        assert store.max_ahead_in_flight <= budget_chunks  # counted at the store
        assert budget.used == 0  # every stream gave its share back on close
        assert set(store.issued.values()) == {1}
    finally:
        plugin.close()


def test_read_ahead_gets_in_flight_never_exceed_the_concurrency_setting(tmp_path: Path) -> None:
    """``fetch.chunk.cache.prefetch.max.concurrency``: with room in the budget for every
    stream's window, the read-ahead GETs at the store at once stay within the setting, and
    the chunks past it wait their turn (each still fetched once, every byte served)."""
    plugin = adaptive_rsm(
        tmp_path,
        fetch_chunk_cache_prefetch_total_max_size=str(64 * CHUNK),
        fetch_chunk_cache_prefetch_max_concurrency="4",
    )
    try:
        segments = [upload(plugin, tmp_path, 10, seed=s) for s in range(1, 9)]
        store = DelayedBackend(plugin.backend, latency=0.02)
        plugin.backend = store
        assert read_at_once(plugin, segments, CHUNK) == [data for _, data in segments]
        assert sum(store.ahead_issued.values()) > 4  # read-ahead did run
        assert store.max_ahead_in_flight <= 4
        assert set(store.issued.values()) == {1}
    finally:
        plugin.close()


def test_a_stream_that_stops_being_read_gives_its_share_back(tmp_path: Path) -> None:
    plugin = adaptive_rsm(
        tmp_path,
        fetch_chunk_cache_prefetch_total_max_size=str(2 * CHUNK),
        fetch_chunk_cache_prefetch_idle_timeout_ms="200",
    )
    try:
        (idle_md, idle_data), (busy_md, busy_data) = (
            upload(plugin, tmp_path, 16, seed=s) for s in (1, 2)
        )
        budget = plugin.read_ahead_budget
        clock = SteppedClock()
        budget._clock = clock
        idle = plugin.fetch_log_segment(idle_md, 0)
        assert idle.read(1) == idle_data[:1]
        # the only stream, right after configure: the whole budget is its share
        wait_until(lambda: budget.used == 2 * CHUNK, what="the first stream's window loaded")
        store = DelayedBackend(plugin.backend, latency=0)
        plugin.backend = store
        busy_key = plugin.keys_for(busy_md).log
        busy = plugin.fetch_log_segment(busy_md, 0)
        assert busy.read(CHUNK) == busy_data[:CHUNK]
        assert budget.used == 2 * CHUNK  # all of it still the first stream's
        assert store.ahead_issued[busy_key] == 0  # so no read-ahead for the second
        clock.now += 0.3  # past idle.timeout.ms: the first stream is idle
        assert busy.read(CHUNK) == busy_data[CHUNK : 2 * CHUNK]  # asks: the idle share goes
        wait_until(lambda: store.ahead_issued[busy_key] > 0, what="read-ahead for the second")
        assert busy.read() == busy_data[2 * CHUNK :]
        assert idle.read() == idle_data[1:]  # an idle stream that comes back starts again
        busy.close()
        idle.close()
        assert budget.used == 0
    finally:
        plugin.close()


def test_read_ahead_of_several_streams_does_not_queue_on_the_fetch_pool(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    # fetch.thread.pool.size is 1: three windows must still all be in flight
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
        lambda: all(gated.flying(k) == set(range(1, 1 + START)) for k in keys),
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


def test_a_stream_takes_warmed_chunks_from_memory_not_the_disk_cache(tmp_path: Path) -> None:
    """Warming loads the next segment's chunks before its stream exists; the stream gets
    them as it gets its own read-ahead, from memory, instead of reading back what the disk
    cache wrote. Their budget is held until then and given back as they are taken."""
    plugin = adaptive_rsm(tmp_path)
    try:
        md, data = upload(plugin, tmp_path, 6, tip=TIP)
        store = DelayedBackend(plugin.backend, latency=0.0)
        plugin.backend = store
        assert plugin.warm(md, 0, md.segment_size_in_bytes) == 6
        wait_until(lambda: len(store.issued) == 6 and store.in_flight == 0, what="warmed")
        assert plugin.read_ahead_budget.used == 6 * CHUNK  # held until a stream takes them
        disk = plugin.chunk_cache._store
        read_back: list[object] = []
        materialise = disk.materialise

        def counted(handle: Any) -> Any:
            read_back.append(handle)
            return materialise(handle)

        disk.materialise = counted  # type: ignore[method-assign]
        with plugin.fetch_log_segment(md, 0) as stream:
            assert stream.read() == data
        assert read_back == []  # nothing read back from the disk cache
        assert len(store.issued) == 6  # nor fetched again
        assert plugin.read_ahead_budget.used == 0
    finally:
        plugin.close()


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
    # no cache: loaded read-ahead lives in the stream, so a parked reader holds no more
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
        loaded = 1 + START  # the reader's chunk and a new stream's window
        wait_until(lambda: len(counted.issued) == loaded, what="the window loaded")
        holds_for(lambda: len(counted.issued) == loaded, 0.3, "nothing past the window")
        assert stream.read() == data[10:]
        stream.close()
        assert set(counted.issued.values()) == {1} and len(counted.issued) == 12
    finally:
        plugin.close()


def test_a_stream_lends_the_chunk_it_is_in_without_a_copy(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    md, data = upload(rsm, tmp_path, 3)
    with rsm.fetch_log_segment(md, 10) as stream:
        assert isinstance(stream, SupportsReadView)
        view = stream.read_view(2 * CHUNK)
        assert view.readonly and view == data[10:CHUNK]  # up to the chunk's end, no further
        assert not isinstance(view.obj, (bytes, bytearray))  # the chunk's own buffer
        assert stream.read(5) == data[CHUNK : CHUNK + 5]  # the same position for every read
        assert stream.read_view(CHUNK) == data[CHUNK + 5 : 2 * CHUNK]


def test_read_ahead_waits_until_the_reader_has_its_first_chunk(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    md, data = upload(rsm, tmp_path, 8)
    gated = gate(rsm)
    key = rsm.keys_for(md).log
    with ThreadPoolExecutor(1) as pool:
        stream = rsm.fetch_log_segment(md, 0)
        first = pool.submit(stream.read, CHUNK)
        wait_until(lambda: gated.flying(key) == {0}, what="the reader's own GET issued")
        holds_for(lambda: gated.flying(key) == {0}, 0.2, "nothing beside the first chunk")
        gated.let_through(key, *range(8))
        assert first.result(10) == data[:CHUNK]
        wait_until(lambda: gated.issued[(key, 1)] == 1, what="read-ahead after the first chunk")
        stream.close()


def test_a_reader_waiting_in_its_first_epoch_widens_the_window_before_the_chunk_lands(
    tmp_path: Path,
) -> None:
    cap = SLOW_START_GROWTH * INITIAL_AHEAD
    plugin = adaptive_rsm(tmp_path, **{PREFETCH_MAX: str(cap * CHUNK)})
    grown: list[TopicIdPartition] = []
    plugin.watch_window(grown.append)
    gated = gate(plugin)
    try:
        md, data = upload(plugin, tmp_path, cap + 8, tip=TIP)
        key = plugin.keys_for(md).log
        gated.let_through(key, 0)
        with ThreadPoolExecutor(1) as pool:
            stream = plugin.fetch_log_segment(md, 0)
            assert pool.submit(stream.read, CHUNK).result(10) == data[:CHUNK]
            first_window = set(range(1, INITIAL_AHEAD + 1))
            wait_until(lambda: gated.flying(key) == first_window, what="the first window")
            assert not grown
            # the consumer is already back for more, and chunk 1 has not landed
            second = pool.submit(stream.read, CHUNK)
            wait_until(
                lambda: gated.flying(key) == set(range(1, cap + 1)),
                what="the grown window's GETs, issued while chunk 1 is still on its way",
            )
            assert grown == [TIP]
            gated.open_all()
            assert second.result(10) == data[CHUNK : 2 * CHUNK]
            stream.close()
    finally:
        gated.open_all()
        plugin.close()


def test_a_free_get_slot_goes_to_the_chunk_its_reader_needs_soonest(tmp_path: Path) -> None:
    # one read-ahead GET at a time; two readers in step, the second one's window asked for
    # after the first one's: its next chunk still goes before the first one's further ones
    plugin = adaptive_rsm(
        tmp_path,
        **{PREFETCH_MAX: str(4 * CHUNK), "fetch_chunk_cache_prefetch_max_concurrency": "1"},
    )
    gated = gate(plugin)
    try:
        a, data_a = upload(plugin, tmp_path, 8, seed=1, tip=TIP)
        b, data_b = upload(plugin, tmp_path, 8, seed=2, tip=TopicIdPartition(TIP.topic_id, "b", 1))
        key_a, key_b = plugin.keys_for(a).log, plugin.keys_for(b).log
        gated.let_through(key_a, 0)
        gated.let_through(key_b, 0)
        with ThreadPoolExecutor(2) as readers:
            stream_a = plugin.fetch_log_segment(a, 0)
            assert readers.submit(stream_a.read, CHUNK).result(10) == data_a[:CHUNK]
            wait_until(lambda: gated.flying(key_a) == {1}, what="a's first read-ahead GET")
            stream_b = plugin.fetch_log_segment(b, 0)
            assert readers.submit(stream_b.read, CHUNK).result(10) == data_b[:CHUNK]
            # queued now: a's chunks 2-4 (2-4 past its reader), then b's 1-4 (1-4 past)
            holds_for(lambda: gated.flying(key_b) == set(), 0.1, "b's GETs wait for the slot")
            gated.let_through(key_a, 1)
            wait_until(lambda: gated.flying(key_b) == {1}, what="b's chunk 1 next, before a's 2")
            assert gated.flying(key_a) == set()
            gated.open_all()
            assert readers.submit(stream_a.read, CHUNK).result(10) == data_a[CHUNK : 2 * CHUNK]
            assert readers.submit(stream_b.read, CHUNK).result(10) == data_b[CHUNK : 2 * CHUNK]
            stream_a.close()
            stream_b.close()
    finally:
        gated.open_all()
        plugin.close()


def test_a_reader_at_its_chunks_end_is_called_back_when_the_next_chunk_lands(
    rsm: ObjectStoreRemoteStorageManager, tmp_path: Path
) -> None:
    """``when_readable``: the event loop, finding the next chunk still on its way, asks to
    be told when it lands instead of a reader thread waiting for it; it is told once that
    GET ends, and ``read_view_now`` then answers. With no GET in flight (the stream's last
    chunk taken) nothing is arranged."""
    gated = gate(rsm)
    md, data = upload(rsm, tmp_path, 3)
    key = rsm.keys_for(md).log
    gated.let_through(key, 0, 1)
    stream = rsm.fetch_log_segment(md, 0)
    assert isinstance(stream, SupportsReadView)
    assert stream.read(CHUNK + 1) == data[: CHUNK + 1]  # the reader is in chunk 1
    assert bytes(stream.read_view(CHUNK)) == data[CHUNK + 1 : 2 * CHUNK]
    wait_until(lambda: 2 in gated.flying(key), what="chunk 2's read-ahead GET")
    assert stream.read_view_now(CHUNK) is None
    landed = threading.Event()
    assert stream.when_readable(landed.set)
    assert not landed.is_set()
    gated.let_through(key, 2)
    assert landed.wait(10), "never called back"
    view = stream.read_view_now(CHUNK)
    assert view is not None and bytes(view) == data[2 * CHUNK :]
    assert not stream.when_readable(landed.set)  # nothing more is loading
    stream.close()
