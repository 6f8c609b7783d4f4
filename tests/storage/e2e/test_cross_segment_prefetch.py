"""Cross-segment prefetch: the manager's remote reader warms the next segment through the
object-store plugin's ``warm`` once a read gets close to the end of its segment.

Real parts in one process: a ``PartitionLog``, the object-store plugin on ``file://``, the
topic-based RLMM over an in-memory metadata topic and the ``RemoteLogManager``; segments are
copied with the manager's own copy task and read back with its read path.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import poll as helpers_poll
from tests.helpers.manual_rlm import log_of_sealed_segments, tier_everything
from tierlog.log import PartitionLog
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.tiered.api import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tierlog.tiered.manager import RemoteFetchRequest, RemoteLogManager

KiB = 1024
MiB = 1024 * KiB
TIP = TopicIdPartition(uuid.UUID(int=11), "warm", 0)


def poll(predicate: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    helpers_poll.wait_until(predicate, timeout_s=timeout_s, interval_s=0.01, what=what)


@dataclass
class WarmStack:
    log: PartitionLog
    rsm: ObjectStoreRemoteStorageManager
    rlm: RemoteLogManager

    def remote(self) -> list[RemoteLogSegmentMetadata]:
        segs = self.rlm.rlmm.list_remote_log_segments(TIP)
        return sorted(
            (s for s in segs if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
            key=lambda s: s.start_offset,
        )

    def read(self, offset: int, max_bytes: int) -> bytes:
        req = RemoteFetchRequest(self.log, offset, max_bytes)
        (res,) = asyncio.run(self.rlm.read_remote([req], max_bytes))
        assert res.error is ErrorCode.NONE, res.error_message
        return bytes(res.records)

    def first_chunk_cached(self, md: RemoteLogSegmentMetadata) -> bool:
        seg = self.rsm.open_segment(md)
        return (seg.cache_id, 0) in self.rsm.chunk_cache

    def indexes_cached(self, md: RemoteLogSegmentMetadata) -> bool:
        seg = self.rsm.open_segment(md)
        return all(
            (seg.cache_id, t.value) in self.rsm.index_cache
            for t in (IndexType.OFFSET, IndexType.TIMESTAMP)
        )

    def manifest_cached(self, md: RemoteLogSegmentMetadata) -> bool:
        return self.rsm.keys_for(md).manifest in self.rsm.manifest_cache


def build_stack(root: Path, segment_sizes: list[int], props: dict[str, str]) -> WarmStack:
    """A partition whose sealed segments (about ``segment_sizes`` bytes each, records of
    incompressible 8 KiB values) are all copied to the object store; one record stays in
    the active segment."""
    lg = log_of_sealed_segments(root / "logs", TIP, segment_sizes, value_bytes=8 * KiB, seed=5)
    rsm = ObjectStoreRemoteStorageManager()
    rsm.configure({"storage.url": (root / "bucket").as_uri(), **props})
    rlm = tier_everything(lg, rsm, TIP, root / "logs")
    stack = WarmStack(lg, rsm, rlm)
    assert len(stack.remote()) == len(segment_sizes)
    return stack


@pytest.fixture
def stacks(tmp_path: Path) -> Iterator[Callable[[list[int], dict[str, str]], WarmStack]]:
    made: list[WarmStack] = []

    def make(sizes: list[int], props: dict[str, str]) -> WarmStack:
        made.append(build_stack(tmp_path / f"s{len(made)}", sizes, props))
        return made[-1]

    yield make
    for s in made:
        s.rlm.close()
        s.log.close()


def offsets_of(records: bytes) -> list[int]:
    view = memoryview(records)
    return [r.offset for h in scan_batches(view) for r in iter_records(records, h)]


def test_reading_the_end_of_a_segment_warms_the_first_chunks_of_the_next(
    stacks: Callable[[list[int], dict[str, str]], WarmStack],
) -> None:
    # every segment fits in one 64 KiB chunk, so the plugin's in-segment read-ahead has
    # nothing to load: only the reader's warm() call can put a chunk in the cache early
    st = stacks(
        [40 * KiB] * 8,
        {
            "chunk.size": str(64 * KiB),
            "encryption.enabled": "false",
            "fetch.chunk.cache.prefetch.max.size": str(128 * KiB),
        },
    )
    segs = st.remote()
    assert not any(st.first_chunk_cached(md) for md in segs[1:])
    window = st.rsm.read_ahead_window(TIP)
    assert window == 128 * KiB  # the cap, two chunks: three segments and a bit
    records = st.read(0, 1 * MiB)
    assert offsets_of(records) == list(range(segs[0].start_offset, segs[0].end_offset + 1))
    poll(lambda: st.first_chunk_cached(segs[1]), "segment 1 warmed by the read of segment 0")
    # the window reaches past segment 1: the one after it is asked for too
    poll(lambda: st.first_chunk_cached(segs[2]), "segment 2 warmed by the read of segment 0")
    # the reader entering segment 1 looks its position up in the indexes: warmed too
    poll(lambda: st.indexes_cached(segs[1]), "segment 1's offset and time indexes warmed")
    assert sum(md.segment_size_in_bytes for md in segs[1:7]) > window
    assert not st.first_chunk_cached(segs[7])  # beyond the window: not loaded
    assert st.rsm.chunk_cache.stats.prefetch_loads >= 2

    hits = st.rsm.chunk_cache.stats.prefetch_hits
    records = st.read(segs[1].start_offset, 1 * MiB)
    assert offsets_of(records)[0] == segs[1].start_offset
    assert st.rsm.chunk_cache.stats.prefetch_hits == hits + 1  # served from the warmed chunk
    poll(lambda: st.first_chunk_cached(segs[2]), "segment 2 warmed by the read of segment 1")


def test_a_read_far_from_the_segment_end_does_not_warm_the_next(
    stacks: Callable[[list[int], dict[str, str]], WarmStack],
) -> None:
    big = 20 * MiB
    st = stacks(
        [big, 40 * KiB],
        {"chunk.size": str(MiB), "fetch.chunk.cache.prefetch.max.size": str(2 * MiB)},
    )
    first, second = st.remote()
    st.read(0, 256 * KiB)  # the first 256 KiB of a segment of 20 MiB
    assert not st.manifest_cached(second) and not st.first_chunk_cached(second)

    # a read near the end of the first segment warms the second
    tail_offset = first.end_offset - 10
    records = st.read(tail_offset, 256 * KiB)
    assert offsets_of(records)[0] == tail_offset
    poll(lambda: st.first_chunk_cached(second), "the next segment warmed from the tail")


def test_warming_is_skipped_without_a_chunk_cache_and_the_read_still_succeeds(
    stacks: Callable[[list[int], dict[str, str]], WarmStack],
) -> None:
    st = stacks([40 * KiB] * 2, {"chunk.size": str(64 * KiB), "fetch.chunk.cache.class": "none"})
    first, second = st.remote()
    records = st.read(0, 1 * MiB)
    assert offsets_of(records) == list(range(first.start_offset, first.end_offset + 1))
    assert st.rsm.chunk_cache.stats.prefetch_loads == 0
    assert offsets_of(st.read(second.start_offset, 1 * MiB))[0] == second.start_offset
