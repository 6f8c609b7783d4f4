"""Turning per-partition offset ranges into Spark input partitions (pure functions).

The plan is the whole consistency story: every offset of [start, end) is given to exactly
one slice, so a job can never return an offset twice, whichever tier it was read from.
Offsets covered by a COPY_FINISHED remote segment are read from the bucket (no broker load);
the rest goes through the broker, which holds everything from the log start offset up to
the high watermark. Offsets below the log start offset no longer exist: they are reported
as lost, and the caller applies `failOnDataLoss`.

Large remote segments are cut where the offset index says a batch starts near a multiple
of `split_bytes` (a whole number of store chunks), so each task starts on a batch boundary
it can seek to without reading the slice before it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

TP = tuple[str, int]
IndexEntries = Sequence[tuple[int, int]]  # (absolute offset, byte position), ascending


@dataclass(frozen=True)
class ColdSegment:
    """A segment readable without the broker. `last` is inclusive, as in Kafka metadata;
    `ref` is whatever the executor needs to open it (picklable)."""

    first: int
    last: int
    size: int
    ref: object


@dataclass(frozen=True)
class Slice:
    """One Spark input partition: offsets [start, end) of `tp`.

    `segment` is None for a broker read. `position` is the byte position in the segment
    of a batch at or before `start`, or -1 when the executor must look it up.
    `end_position` is the last byte (inclusive) the slice can need, or -1 for the segment's
    end: without it the read stream's read-ahead would fetch chunks past the slice, which
    belong to the next slice and are fetched again by its own task.
    """

    tp: TP
    start: int
    end: int
    segment: ColdSegment | None = None
    position: int = -1
    end_position: int = -1
    aborted: tuple[tuple[int, int], ...] = ()
    """read_committed, cold slices: (producer id, first offset) of the aborted transactions
    overlapping the slice whose ABORT marker is at or after its start."""

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Lost:
    tp: TP
    start: int
    end: int

    def describe(self) -> str:
        t, p = self.tp
        return f"offsets [{self.start}, {self.end}) of {t}-{p}"


@dataclass(frozen=True)
class Plan:
    slices: list[Slice]
    lost: list[Lost]


def plan_partition(
    tp: TP,
    start: int,
    end: int,
    log_start: int,
    high_watermark: int,
    segments: Sequence[ColdSegment],
    *,
    broker: bool = True,
) -> Plan:
    """Cover [start, end) with remote slices where a segment covers, else broker slices.

    Overlapping segments (successive uploads of the same offsets) are resolved by taking,
    at each point, the covering segment that reaches furthest. With `broker=False` (no
    broker to ask, e.g. reading a log directory) offsets no segment covers are lost.
    """
    lost: list[Lost] = []
    slices: list[Slice] = []
    end = min(end, high_watermark)
    if start < log_start:
        lost.append(Lost(tp, start, min(log_start, end)))
        start = log_start
    ordered = sorted(segments, key=lambda s: (s.first, -s.last))
    cursor = start
    while cursor < end:
        covering = [s for s in ordered if s.first <= cursor <= s.last]
        if covering:
            seg = max(covering, key=lambda s: s.last)
            stop = min(seg.last + 1, end)
            slices.append(Slice(tp, cursor, stop, seg, 0 if cursor == seg.first else -1))
            cursor = stop
            continue
        later = [s.first for s in ordered if s.first > cursor]
        stop = min([end, *later])
        if broker:
            slices.append(Slice(tp, cursor, stop))
        else:
            lost.append(Lost(tp, cursor, stop))
        cursor = stop
    return Plan(slices, lost)


def split_points(
    index: IndexEntries, start: int, end: int, split_bytes: int
) -> list[tuple[int, int]]:
    """(offset, position) cuts strictly inside (start, end), one per `split_bytes` of segment.

    Each cut is the last indexed batch at or before a multiple of `split_bytes`, so reading
    from it loses nothing and re-reads at most one index interval.
    """
    positions = [pos for _, pos in index]
    cuts: list[tuple[int, int]] = []
    if not index:
        return cuts
    first_pos = position_for(index, start)
    boundary = (first_pos // split_bytes + 1) * split_bytes
    while boundary <= positions[-1]:
        i = bisect.bisect_right(positions, boundary) - 1
        offset, pos = index[i]
        if start < offset < end and (not cuts or offset > cuts[-1][0]):
            cuts.append((offset, pos))
        boundary += split_bytes
    return cuts


def position_for(index: IndexEntries, offset: int) -> int:
    """Byte position of the last indexed batch starting at or before `offset` (0 if none)."""
    i = bisect.bisect_right([o for o, _ in index], offset) - 1
    return index[i][1] if i >= 0 else 0


def split_large_segments(
    slices: Sequence[Slice], split_bytes: int, index_of: Callable[[ColdSegment], IndexEntries]
) -> list[Slice]:
    """Cut remote slices of segments bigger than `split_bytes` along the offset index."""
    out: list[Slice] = []
    for s in slices:
        if s.segment is None or s.segment.size <= split_bytes:
            out.append(s)
            continue
        index = index_of(s.segment)
        positions = [pos for _, pos in index]
        cuts = split_points(index, s.start, s.end, split_bytes)
        lo, lo_pos = s.start, s.position
        for offset, pos in cuts:
            # the cut entry is the batch holding offsets up to `offset` (its last offset,
            # as in Kafka's index), so the slice before it reads that whole batch: up to
            # the next indexed batch, which starts after it
            after = bisect.bisect_right(positions, pos)
            end_pos = positions[after] - 1 if after < len(positions) else s.end_position
            out.append(replace(s, start=lo, end=offset, position=lo_pos, end_position=end_pos))
            lo, lo_pos = offset, pos
        out.append(replace(s, start=lo, end=s.end, position=lo_pos))
    return out


def slice_bytes(s: Slice) -> int:
    """Estimated segment bytes a cold slice reads (0 for broker slices)."""
    seg = s.segment
    if seg is None:
        return 0
    return seg.size * (s.end - s.start) // max(seg.last + 1 - seg.first, 1)


def pack_slices(
    slices: Sequence[Slice], target_bytes: int, min_groups: int
) -> list[tuple[Slice, ...]]:
    """Group consecutive cold slices of one partition into input partitions of up to
    `target_bytes`, but into no fewer than `min_groups` when there is enough data.

    Every Spark task costs a Python worker round trip (measured ~70 ms here), so a topic
    tiered in small segments would spend more time starting tasks than reading. Segments
    of normal size (>= target) stay one input partition each; broker slices stay alone.
    The order of slices, and so of offsets, is kept.
    """
    cold = sum(slice_bytes(s) for s in slices)
    target = max(1, min(target_bytes, cold // max(min_groups, 1)))
    groups: list[tuple[Slice, ...]] = []
    current: list[Slice] = []
    size = 0
    for s in slices:
        b = slice_bytes(s)
        if current and (s.segment is None or s.tp != current[0].tp or size + b > target):
            groups.append(tuple(current))
            current, size = [], 0
        if s.segment is None:
            groups.append((s,))
            continue
        current.append(s)
        size += b
    if current:
        groups.append(tuple(current))
    return groups


def _divide(s: Slice, parts: int) -> list[Slice]:
    if parts <= 1 or s.size <= 1:
        return [s]
    parts = min(parts, s.size)
    bounds = [s.start + (s.size * i) // parts for i in range(parts + 1)]
    return [
        replace(s, start=a, end=b, position=s.position if i == 0 else -1)
        for i, (a, b) in enumerate(itertools.pairwise(bounds))
    ]


def cap_records(slices: Sequence[Slice], max_records: int) -> list[Slice]:
    """Spark's `maxRecordsPerPartition`: no slice spans more than `max_records` offsets."""
    return [piece for s in slices for piece in _divide(s, math.ceil(s.size / max_records))]


def ensure_min_partitions(slices: Sequence[Slice], min_partitions: int) -> list[Slice]:
    """Spark's `minPartitions`: split ranges in proportion to their size, as Spark does."""
    total = sum(s.size for s in slices)
    if len(slices) >= min_partitions or total == 0:
        return list(slices)
    return [
        piece
        for s in slices
        for piece in _divide(s, max(round(s.size / total * min_partitions), 1))
    ]


def rate_limit(start: dict[TP, int], latest: dict[TP, int], limit: int) -> dict[TP, int]:
    """Spark's `maxOffsetsPerTrigger` split: each partition gets its share of `limit` in
    proportion to its backlog, rounded down, but a backlog never starves (a share below
    one offset rounds up)."""
    sizes = {tp: end - start.get(tp, end) for tp, end in latest.items()}
    sizes = {tp: n for tp, n in sizes.items() if n > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out: dict[TP, int] = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        share = limit * sizes[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start[tp] + step)
    return out
