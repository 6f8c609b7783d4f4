"""Offset for a timestamp without a broker: ListOffsets' answer, worked out from segments.

When the job plans from the bucket's manifests (or a log directory), nobody can answer
ListOffsets, yet `startingTimestamp` / `endingTimestamp` must mean what they mean with a
broker (and in Spark's Kafka source): the first offset, in offset order, whose record
timestamp is >= the target. Kafka finds it per segment: skip segments whose largest
timestamp is smaller, then start at the time index's entry for the target and scan
batches. We do the same with the segment objects themselves:

  * a remote segment's metadata carries its largest timestamp, so whole segments are
    skipped without a read (a log directory's segments are not: they are scanned);
  * a time index entry (T, O) says every record before O's batch has a timestamp <= T,
    so the scan starts at the last entry with T < target; with no usable index it starts
    at the segment's first batch;
  * the scan decodes whole batches (control batches hold no records and are skipped) and
    stops at the first record at or past the target, so out-of-order timestamps give the
    same answer as Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from tierlog.spark.decode import decode_batches
from tierlog.spark.options import TP
from tierlog.spark.planning import ColdSegment, position_for
from tierlog.spark.segments import (
    FileSegmentRef,
    RemoteSegmentRef,
    offset_index,
    open_log,
    storage_plugin,
)
from tierlog.tiered.api import IndexType, RemoteResourceNotFoundException

log = logging.getLogger(__name__)

SCAN_READ = 1 << 20  # the scan after an index lookup is short: small reads
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">u4")])
NOT_FOUND = (-1, -1)  # ListOffsets' answer when no record qualifies


def parse_time_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """Kafka `.timeindex` entries (i64 timestamp, u32 relative offset) as (timestamp,
    absolute offset). Preallocated zeros of an active segment end the list: entries stop
    at the first one whose timestamp and offset do not both move forward. (Dropping
    entries is always safe: the scan then starts earlier.)"""
    raw = np.frombuffer(data[: len(data) // 12 * 12], dtype=_TIME_ENTRY)
    if len(raw) == 0:
        return []
    ts = raw["ts"].astype(np.int64)
    rel = raw["rel"].astype(np.int64)
    forward = np.ones(len(raw), dtype=bool)
    forward[1:] = (ts[1:] > ts[:-1]) & (rel[1:] > rel[:-1])
    stop = int(np.argmin(forward)) if not bool(forward.all()) else len(raw)
    return list(zip(ts[:stop].tolist(), (rel[:stop] + base_offset).tolist(), strict=True))


def _time_index(ref: object, base_offset: int) -> list[tuple[int, int]]:
    if isinstance(ref, FileSegmentRef):
        path = ref.log_path[: -len(".log")] + ".timeindex"
        try:
            with open(path, "rb") as f:
                return parse_time_index(f.read(), base_offset)
        except FileNotFoundError:
            return []
    if isinstance(ref, RemoteSegmentRef):
        with storage_plugin(ref.rsm).fetch_index(ref.metadata(), IndexType.TIMESTAMP) as stream:
            return parse_time_index(stream.read(), base_offset)
    return []


def _largest_timestamp(ref: object) -> int | None:
    """The segment's largest record timestamp if known without reading it."""
    if isinstance(ref, RemoteSegmentRef):
        return ref.metadata().max_timestamp_ms
    return None


def segment_offset_for_timestamp(seg: ColdSegment, target: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of `seg` with timestamp >= target."""
    largest = _largest_timestamp(seg.ref)
    if largest is not None and largest < target:
        return None
    start = seg.first
    for ts, offset in _time_index(seg.ref, seg.first):
        if ts >= target:
            break
        start = offset
    position = position_for(offset_index(seg.ref, seg.first), start) if start > seg.first else 0
    target_us = target * 1000
    with open_log(seg.ref, position) as stream:
        pending = b""
        while True:
            chunk = stream.read(SCAN_READ)
            data = pending + chunk if pending else chunk
            d = decode_batches(
                data, topic="", partition=0, start=start, end=seg.last + 1, include_headers=False
            )
            if d.batch.num_rows:
                stamps = d.batch.column("timestamp").cast("int64").to_numpy()
                hits = np.nonzero(stamps >= target_us)[0]
                if len(hits):
                    i = int(hits[0])
                    offset = int(d.batch.column("offset")[i].as_py())
                    return offset, int(stamps[i]) // 1000
            pending = data[d.consumed :]
            if not chunk or d.next_offset > seg.last:
                return None


def offset_for_timestamp(segments: Sequence[ColdSegment], target: int) -> tuple[int, int]:
    """ListOffsets by timestamp over one partition's segments: (offset, timestamp) of the
    first record with timestamp >= target, or (-1, -1). Overlapping segments (a retried
    upload) hold the same records, so taking them in offset order is enough."""
    for seg in sorted(segments, key=lambda s: (s.first, s.last)):
        try:
            found = segment_offset_for_timestamp(seg, target)
        except RemoteResourceNotFoundException as exc:
            log.warning("segment [%d, %d] is gone, not searched: %s", seg.first, seg.last, exc)
            continue
        if found is not None:
            return found
    return NOT_FOUND


def offsets_for_timestamps(
    segments: Mapping[TP, Sequence[ColdSegment]], queries: Mapping[TP, int]
) -> dict[TP, tuple[int, int]]:
    """The shape of `BrokerClient.list_offsets` for timestamp queries."""
    return {tp: offset_for_timestamp(segments.get(tp, ()), ts) for tp, ts in queries.items()}
