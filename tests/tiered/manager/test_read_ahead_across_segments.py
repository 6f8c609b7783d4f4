"""The remote reader continues the object-store plugin's read-ahead window into the next
segment, and a read entering a segment at its first batch does not wait for the index
lookup before its first chunk GET (but still fails if the index is missing).

Real parts in one process: a ``PartitionLog``, the object-store plugin on ``file://``, the
topic-based RLMM over an in-memory metadata topic and the ``RemoteLogManager``. A wrapper
around the plugin's backend records every ranged GET of a ``.log`` object.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from tests.helpers.manual_rlm import log_of_sealed_segments, tier_everything
from tests.helpers.poll import wait_until
from tests.storage.objectstore.objectstore_helpers import SameStoreBackend
from tierlog.log import PartitionLog
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.tiered.api import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    TopicIdPartition,
)
from tierlog.tiered.manager import (
    RemoteFetchRequest,
    RemoteFetchResult,
    RemoteLogManager,
)

KiB = 1024
CHUNK = 64 * KiB
WINDOW = CHUNK  # fetch.chunk.cache.prefetch.max.size: one chunk in flight
REACH = WINDOW  # how far a stream may load ahead of its reader (one chunk: it cannot adapt)
TIP = TopicIdPartition(uuid.UUID(int=405), "ahead", 0)


class RecordingBackend(SameStoreBackend):
    """The plugin's backend, recording each ranged GET of a ``.log`` object by chunk."""

    def __init__(self, inner: ObjectBackend) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self.gets: Counter[tuple[str, int]] = Counter()

    def get_range_view(self, key: str, start: int, end: int, *rest: Any, **kw: Any) -> memoryview:
        with self._lock:
            self.gets[(key, start // CHUNK)] += 1
        return super().get_range_view(key, start, end, *rest, **kw)

    def chunks_of(self, key: str) -> set[int]:
        with self._lock:
            return {c for k, c in self.gets if k == key}


@dataclass
class Stack:
    log: PartitionLog
    rsm: ObjectStoreRemoteStorageManager
    rlm: RemoteLogManager
    backend: RecordingBackend

    def segments(self) -> list[RemoteLogSegmentMetadata]:
        return sorted(
            (
                s
                for s in self.rlm.rlmm.list_remote_log_segments(TIP)
                if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ),
            key=lambda s: s.start_offset,
        )

    def key(self, md: RemoteLogSegmentMetadata) -> str:
        return str(self.rsm.keys_for(md).log)

    def read(self, offset: int, max_bytes: int) -> RemoteFetchResult:
        (res,) = asyncio.run(
            self.rlm.read_remote([RemoteFetchRequest(self.log, offset, max_bytes)], max_bytes)
        )
        return res


def offsets_of(records: bytes | memoryview) -> list[int]:
    view = memoryview(records)
    return [r.offset for h in scan_batches(view) for r in iter_records(view, h)]


def tiered(
    tmp_path: Path,
    segments: int,
    window: int,
    seed: int,
    backend: type[RecordingBackend] = RecordingBackend,
    **settings: Any,
) -> Stack:
    """``segments`` sealed segments of about 3.5 chunks (records of incompressible 6 KiB
    values), all copied to the object store (read-ahead cap ``window``) and gone locally,
    read through ``backend``; ``settings``: more ``RemoteLogManagerConfig`` fields."""
    lg = log_of_sealed_segments(
        tmp_path / "logs", TIP, [7 * CHUNK // 2] * segments, value_bytes=6 * KiB, seed=seed
    )
    rsm = ObjectStoreRemoteStorageManager()
    rsm.configure(
        {
            "storage.url": (tmp_path / "bucket").as_uri(),
            "chunk.size": str(CHUNK),
            "fetch.chunk.cache.class": "memory",
            "fetch.chunk.cache.prefetch.max.size": str(window),
        }
    )
    rlm = tier_everything(lg, rsm, TIP, tmp_path / "logs", **settings)
    recording = backend(rsm.backend)
    rsm.backend = recording
    # start from empty caches: the copy above left nothing in the chunk cache, but the
    # manifests it wrote are not to be taken for warmed ones
    rsm.manifest_cache.clear()
    rsm.index_cache.clear()
    st = Stack(lg, rsm, rlm, recording)
    assert len(st.segments()) == segments
    return st


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    st = tiered(tmp_path, 4, WINDOW, 405)
    yield st
    st.rlm.close()
    st.log.close()


def test_read_ahead_continues_into_the_next_segment_as_the_reader_nears_the_end(
    stack: Stack,
) -> None:
    assert stack.rsm.read_ahead_bytes == REACH
    first, second = stack.segments()[:2]
    size = first.segment_size_in_bytes
    offset = first.start_offset
    consumed = 0
    reads_near_the_end = 0
    while offset <= first.end_offset:
        res = stack.read(offset, 24 * KiB)
        assert res.error is ErrorCode.NONE, res.error_message
        got = offsets_of(res.records)
        assert got[0] == offset
        offset = got[-1] + 1
        consumed += len(res.records)
        spill = REACH - (size - consumed)  # bytes of the next segment within reach
        if spill <= 0:
            continue
        reads_near_the_end += 1
        wanted = set(range(0, (spill - 1) // CHUNK + 1))

        # the reader asks for exactly the next segment's part of the reach, no more
        def next_segment_chunks_requested(wanted: set[int] = wanted) -> bool:
            return stack.backend.chunks_of(stack.key(second)) >= wanted

        wait_until(
            next_segment_chunks_requested,
            what=f"chunks {sorted(wanted)} of the next segment requested",
        )
        assert stack.backend.chunks_of(stack.key(second)) == wanted
    assert reads_near_the_end >= 2  # the reach crossed the boundary step by step
    assert offset == second.start_offset

    # the reader entering the next segment finds its first chunks already loaded
    before = sum(stack.backend.gets.values())
    res = stack.read(offset, 24 * KiB)
    assert offsets_of(res.records)[0] == second.start_offset
    hits = stack.rsm.chunk_cache.stats.prefetch_hits
    assert hits >= 1
    assert sum(stack.backend.gets.values()) - before <= 2  # only read-ahead further on


def test_the_next_segments_manifest_and_indexes_are_warmed_before_its_chunks(
    stack: Stack,
) -> None:
    segs = stack.segments()
    res = stack.read(segs[0].start_offset, 64 * KiB)  # far from the end in bytes, but
    assert res.error is ErrorCode.NONE  # within WARM_LEAD_WINDOWS windows of it
    wait_until(
        lambda: stack.rsm.keys_for(segs[1]).manifest in stack.rsm.manifest_cache,
        what="next manifest warmed",
    )
    cache_id = stack.rsm.open_segment(segs[1]).cache_id
    wait_until(
        lambda: all(
            (cache_id, t.value) in stack.rsm.index_cache
            for t in (IndexType.OFFSET, IndexType.TIMESTAMP)
        ),
        what="next segment's indexes warmed",
    )
    assert not stack.backend.chunks_of(stack.key(segs[1]))  # no chunk before the window
    assert stack.rsm.keys_for(segs[2]).manifest not in stack.rsm.manifest_cache


def test_a_sequential_read_across_segments_gets_every_chunk_once(stack: Stack) -> None:
    segs = stack.segments()
    offset = segs[0].start_offset
    got: list[int] = []
    while offset <= segs[-1].end_offset:
        res = stack.read(offset, 40 * KiB)
        assert res.error is ErrorCode.NONE, res.error_message
        batch = offsets_of(res.records)
        got += batch
        offset = batch[-1] + 1
    assert got == list(range(segs[0].start_offset, segs[-1].end_offset + 1))
    expected = {
        (stack.key(md), c)
        for md in segs
        for c in range((md.segment_size_in_bytes + CHUNK - 1) // CHUNK)
    }
    wait_until(lambda: set(stack.backend.gets) == expected, what="every chunk fetched")
    assert set(stack.backend.gets.values()) == {1}


def test_a_read_at_a_segments_first_batch_gets_its_chunk_while_the_index_lookup_waits(
    stack: Stack,
) -> None:
    md = stack.segments()[0]
    release = threading.Event()
    fetch_index = stack.rsm.fetch_index

    def held(metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        release.wait(20)
        stream: BinaryIO = fetch_index(metadata, index_type)
        return stream

    stack.rsm.fetch_index = held  # type: ignore[method-assign]
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(stack.read, md.start_offset, 24 * KiB)
        wait_until(
            lambda: 0 in stack.backend.chunks_of(stack.key(md)),
            what="first chunk GET while the offset index is held",
        )
        assert not reading.done()  # nothing is served before the lookup succeeded
        release.set()
        res = reading.result(20)
    assert res.error is ErrorCode.NONE
    assert offsets_of(res.records)[0] == md.start_offset


def test_a_missing_index_still_fails_a_read_at_a_segments_first_batch(stack: Stack) -> None:
    md = stack.segments()[1]

    def missing(metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        raise RemoteResourceNotFoundException(f"{index_type.name} index is gone")

    stack.rsm.fetch_index = missing  # type: ignore[method-assign]
    res = stack.read(md.start_offset, 24 * KiB)
    assert res.error is not ErrorCode.NONE
    assert not res.records


def test_a_sequential_fetch_within_the_chunk_is_answered_without_the_reader_pool(
    stack: Stack,
) -> None:
    md = stack.segments()[0]
    labels = {"topic": TIP.topic, "partition": str(TIP.partition)}

    def ready() -> float:
        return stack.rlm.metrics.value("tierlog_remote_fetch_ready_total", **labels)

    first = stack.read(md.start_offset, 1)  # one batch; the stream parks in its chunk
    got = offsets_of(first.records)
    assert got == [md.start_offset] and ready() == 0
    second = stack.read(got[-1] + 1, 1)
    assert offsets_of(second.records) == [got[-1] + 1]
    assert ready() == 1  # served from the parked chunk on the caller's loop


def test_sequential_fetches_across_chunk_boundaries_are_answered_on_the_loop(
    stack: Stack,
) -> None:
    """Once the chunks it needs have landed, every Fetch of a sequential reader after the
    first (which opens the stream) is answered on the caller's loop: the batches within a
    chunk, the first one after a boundary (the stream still holds the rest of that chunk)
    and the batch across the boundary itself (joined from the two chunks in memory,
    ``SegmentCursor.fill_now``)."""
    md = stack.segments()[0]
    labels = {"topic": TIP.topic, "partition": str(TIP.partition)}

    def landed() -> bool:
        return all(
            future.done()
            for cursor in stack.rlm.reader.parked.cursors()
            for future in cursor.stream._pending.values()  # type: ignore[attr-defined]
        )

    offset, position, crossing = md.start_offset, 0, 0
    fetches = 25
    for i in range(fetches):
        wait_until(landed, what="the read-ahead GETs landed")
        res = stack.read(offset, 1)  # one batch per Fetch
        size = len(res.records)
        got = offsets_of(res.records)
        assert got[0] == offset
        if i > 0 and position // CHUNK != (position + size - 1) // CHUNK:
            crossing += 1
        position += size
        offset = got[-1] + 1
    assert crossing >= 2  # the read passed two chunk boundaries
    ready = stack.rlm.metrics.value("tierlog_remote_fetch_ready_total", **labels)
    assert ready == fetches - 1


class HoldingBackend(RecordingBackend):
    """``RecordingBackend`` with the GETs of chosen chunks held until released."""

    def __init__(self, inner: ObjectBackend) -> None:
        super().__init__(inner)
        self._cond = threading.Condition()
        self.held: set[tuple[str, int]] = set()
        self.waiting: set[tuple[str, int]] = set()

    def get_range_view(self, key: str, start: int, end: int, *rest: Any, **kw: Any) -> memoryview:
        chunk = (key, start // CHUNK)
        with self._cond:
            self.waiting.add(chunk)
            self._cond.notify_all()
            assert self._cond.wait_for(lambda: chunk not in self.held, 20.0), f"{chunk} held"
            self.waiting.discard(chunk)
        return super().get_range_view(key, start, end, *rest, **kw)

    def release(self, chunk: tuple[str, int]) -> None:
        with self._cond:
            self.held.discard(chunk)
            self._cond.notify_all()


def test_a_fetch_whose_next_chunk_is_on_its_way_is_answered_on_the_loop_when_it_lands(
    tmp_path: Path,
) -> None:
    """A sequential reader's Fetch at the end of its chunk, the next chunk's read-ahead GET
    in flight: the event loop waits for that GET to end and answers from it
    (``SupportsReadView.when_readable``), instead of a reader thread blocking on it."""
    st = tiered(tmp_path, 2, 2 * CHUNK, 406, HoldingBackend, remote_fetch_max_wait_ms=30_000)
    lg, rsm, rlm, backend = st.log, st.rsm, st.rlm, st.backend
    assert isinstance(backend, HoldingBackend)
    try:
        md = st.segments()[0]
        second_chunk = (str(rsm.keys_for(md).log), 1)
        backend.held.add(second_chunk)
        labels = {"topic": TIP.topic, "partition": str(TIP.partition)}

        def ready() -> float:
            return rlm.metrics.value("tierlog_remote_fetch_ready_total", **labels)

        async def fetch(offset: int) -> RemoteFetchResult:
            (res,) = await rlm.read_remote([RemoteFetchRequest(lg, offset, 1)], 1 << 20)
            return res

        async def scenario() -> None:
            offset, position = md.start_offset, 0
            while True:  # one batch per Fetch, up to the last whole batch in chunk 0
                res = await fetch(offset)
                position += len(res.records)
                offset = offsets_of(res.records)[-1] + 1
                if position + len(res.records) > CHUNK:
                    break
            await asyncio.to_thread(
                wait_until,
                lambda: second_chunk in backend.waiting,
                20,
                what="chunk 1's read-ahead GET, held",
            )
            on_loop = ready()
            answer = asyncio.ensure_future(fetch(offset))
            # the Fetch's first step (it finds chunk 1 on its way and waits for that GET)
            # is queued before the release: the GET ends only once the Fetch waits for it
            asyncio.get_running_loop().call_soon(backend.release, second_chunk)
            res = await asyncio.wait_for(answer, 20)
            assert res.error is ErrorCode.NONE, res.error_message
            assert offsets_of(res.records)[0] == offset
            assert ready() == on_loop + 1  # answered on the loop, not by a reader thread

        asyncio.run(scenario())
    finally:
        backend.held.clear()
        backend.release(second_chunk)
        rlm.close()
        lg.close()
