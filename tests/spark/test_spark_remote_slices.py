"""Slices of a large remote segment, read by executors straight from the bucket.

No broker and no Spark: a segment is uploaded with the object-store plugin to a `file://`
bucket, planned into slices along its offset index, and each slice is read the way an
executor reads it, with the plugin's GETs counted at its store boundary.
"""

from __future__ import annotations

import os
import struct
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from tests.spark.spark_batches import Rec, build
from tests.spark.spark_plugins import object_store
from tests.storage.objectstore.objectstore_helpers import SameStoreBackend
from tierlog.spark.planning import ColdSegment, Slice, split_large_segments
from tierlog.spark.reader import ReadContext, read_slice
from tierlog.spark.segments import RemoteSegmentRef, RsmSpec, offset_index
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.tiered.api import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

CHUNK = 64 * 1024
BATCHES, PER_BATCH, VALUE = 40, 50, 2000  # ~100 KB batches, ~4 MB, ~62 chunks
T0 = 1_700_000_000_000


class CountingBackend(SameStoreBackend):
    """The plugin's backend, counting the `.log` chunks its ranged GETs ask for."""

    def __init__(self, inner: ObjectBackend) -> None:
        super().__init__(inner)
        self.chunks: Counter[int] = Counter()

    def get_range_view(self, key: str, start: int, end: int, *rest: Any, **kw: Any) -> memoryview:
        if key.endswith(".log"):
            self.chunks[start // CHUNK] += 1
        return super().get_range_view(key, start, end, *rest, **kw)


def test_split_slices_read_exactly_their_offsets_and_no_chunk_past_their_end(
    tmp_path: Path,
) -> None:
    spec = RsmSpec.of(
        "objectstore",
        {
            "storage.url": (tmp_path / "bucket").as_uri(),
            "chunk.size": str(CHUNK),
            "fetch.chunk.cache.class": "none",  # as the Spark source runs: read once
            "fetch.chunk.cache.prefetch.max.size": str(8 * CHUNK),
        },
    )
    log, index = bytearray(), bytearray()
    for b in range(BATCHES):
        first = b * PER_BATCH
        index += struct.pack(">II", first + PER_BATCH - 1, len(log))  # last offset, position
        recs = [Rec(first + i, T0 + first + i, None, os.urandom(VALUE)) for i in range(PER_BATCH)]
        log += build(recs, 0)
    seg_dir = tmp_path / "segment"
    seg_dir.mkdir()
    (seg_dir / "s.log").write_bytes(log)
    (seg_dir / "s.index").write_bytes(index)
    for name in ("s.timeindex", "s.snapshot"):
        (seg_dir / name).write_bytes(b"")
    tip = TopicIdPartition(uuid.uuid4(), "history", 0)
    last = BATCHES * PER_BATCH - 1
    md = RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
        start_offset=0,
        end_offset=last,
        max_timestamp_ms=T0 + last,
        broker_id=1,
        event_timestamp_ms=T0,
        segment_size_in_bytes=len(log),
        custom_metadata=None,
        state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        segment_leader_epochs={0: 0},
    )
    rsm = object_store(spec)
    rsm.copy_log_segment_data(
        md,
        LogSegmentData(
            log_segment=seg_dir / "s.log",
            offset_index=seg_dir / "s.index",
            time_index=seg_dir / "s.timeindex",
            transaction_index=None,
            producer_snapshot_index=seg_dir / "s.snapshot",
            leader_epoch_index=b"0\n1\n0 0\n",
        ),
    )
    ref = RemoteSegmentRef.of(spec, md)
    cold = ColdSegment(0, last, len(log), ref)
    slices = split_large_segments(
        [Slice(("history", 0), 0, last + 1, cold, 0)],
        1 << 20,
        lambda s: offset_index(s.ref, s.first),
    )
    assert len(slices) >= 3
    counted = CountingBackend(rsm.backend)
    rsm.backend = counted
    ctx = ReadContext(include_headers=False, fail_on_data_loss=True, bootstrap=None)
    seen: list[int] = []
    for s in slices:
        counted.chunks.clear()
        offsets = [o for b in read_slice(s, ctx) for o in b.column("offset").to_pylist()]
        assert offsets == list(range(s.start, s.end))
        seen += offsets
        assert s.end_position == -1 or max(counted.chunks) <= s.end_position // CHUNK, (
            f"slice [{s.start}, {s.end}) ending at byte {s.end_position} fetched chunks "
            f"{sorted(counted.chunks)}"
        )
        assert set(counted.chunks.values()) == {1}
    assert seen == list(range(last + 1))
