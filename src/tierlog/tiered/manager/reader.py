"""The remote read path, synchronous: runs on the reader pool, never on the event loop.

One read serves one partition from exactly one remote segment (as Kafka does): find the
``COPY_SEGMENT_FINISHED`` segment covering ``(epoch for offset, offset)``, turn the offset into
a byte position with the cached offset index, stream from there skipping batches that end
below the offset, then copy whole batches up to the byte budget. A segment with no matching
batch (compacted away) moves the read to the next segment. Only whole batches are returned,
so a response never ends in a partial batch.

A read that ends within ``WARM_WINDOW_BYTES`` of its segment's end asks the storage plugin to
warm the next segment when the plugin offers ``warm(metadata)`` (duck-typed, optional): the
plugin's own read-ahead stops at a segment boundary, so without this a catching-up consumer
would wait a full object-store round trip at the start of every segment. The call runs on a
small pool of its own, once per segment: ``warm`` starts with the next segment's manifest, a
round trip the read that triggered it must not wait for.

Timestamp lookups walk the epochs from the starting offset's epoch upward and consider only
finished, in-lineage segments; when the matching segment is still present locally the caller
is told to search locally instead, which saves remote index fetches.
"""

from __future__ import annotations

import logging
import struct
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Final

from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import (
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    RECORDS_OFFSET,
    RecordsError,
    check_batch,
    iter_records,
    read_header,
)
from tierlog.tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    TopicIdPartition,
)
from tierlog.tiered.manager.index_cache import RemoteIndexCache
from tierlog.tiered.manager.index_files import AbortedTxn
from tierlog.tiered.manager.lineage import (
    EpochEntry,
    build_filtered_leader_epoch_map,
    epoch_for_offset,
    is_remote_segment_within_leader_epochs,
    next_epoch,
)

__all__ = [
    "SEARCH_LOCAL",
    "WARM_WINDOW_BYTES",
    "RemoteOffsetOutOfRange",
    "RemoteReadData",
    "RemoteReadSpec",
    "RemoteSegmentCorrupted",
    "find_offset_by_timestamp",
    "read_remote_segment",
]

_PREFIX = struct.Struct(">qi")

#: Reads ending this close to their segment's end warm the next segment; matches the
#: object-store plugin's default read-ahead, so warming starts where its read-ahead runs out.
WARM_WINDOW_BYTES = 16 * 1024 * 1024

log = logging.getLogger(__name__)

_WARM_THREADS = 2
_WARMED_REMEMBERED = 4096
_warm_pool = ThreadPoolExecutor(_WARM_THREADS, thread_name_prefix="remote-log-warm")
_warm_lock = threading.Lock()
#: Segments already handed to ``warm`` (bounded, oldest forgotten first).
_warmed: OrderedDict[uuid.UUID, None] = OrderedDict()


class RemoteOffsetOutOfRange(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)


class RemoteSegmentCorrupted(KafkaError):
    """The remote copy of a segment is damaged where this read needs it (a batch fails its
    CRC, or the object ends before the segment's last offset). Only this partition of this
    fetch fails; nothing past the damage is skipped over or served."""

    def __init__(self, md: RemoteLogSegmentMetadata, message: str) -> None:
        super().__init__(
            ErrorCode.CORRUPT_MESSAGE,
            f"remote segment {md.remote_log_segment_id.id} "
            f"({md.start_offset}..{md.end_offset}) is corrupt: {message}",
        )


def _valid(batch: bytes, md: RemoteLogSegmentMetadata, expected_base: int | None) -> bool:
    """CRC, plus the offsets the CRC does not cover: inside the segment, and contiguous with
    the previous batch (tiered topics are never compacted)."""
    try:
        h = check_batch(batch, 0, len(batch), verify_crc=True)
    except RecordsError:
        return False
    if expected_base is not None and h.base_offset != expected_base:
        return False
    return md.start_offset <= h.base_offset <= h.last_offset <= md.end_offset


@dataclass(frozen=True)
class RemoteReadSpec:
    tip: TopicIdPartition
    fetch_offset: int
    max_bytes: int
    min_one_message: bool
    epochs: Sequence[EpochEntry]
    read_committed: bool = False


@dataclass(frozen=True)
class RemoteReadData:
    records: bytes
    aborted_transactions: list[AbortedTxn] | None
    segment: RemoteLogSegmentMetadata | None
    bytes_fetched: int = 0


class _SearchLocal:
    def __repr__(self) -> str:
        return "SEARCH_LOCAL"


SEARCH_LOCAL: Final = _SearchLocal()


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    chunks = []
    left = n
    while left:
        b = stream.read(left)
        if not b:
            return None
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def _next_batch(stream: BinaryIO) -> bytes | None:
    prefix = _read_exact(stream, LOG_OVERHEAD)
    if prefix is None:
        return None
    _base, length = _PREFIX.unpack(prefix)
    if length < RECORDS_OFFSET - LOG_OVERHEAD:
        return None  # trailing garbage or preallocated zeros: the segment ends here
    rest = _read_exact(stream, length)
    return None if rest is None else prefix + rest


def _segment_for(
    rlmm: RemoteLogMetadataManager, tip: TopicIdPartition, epochs: Sequence[EpochEntry], offset: int
) -> RemoteLogSegmentMetadata | None:
    epoch = epoch_for_offset(epochs, offset)
    if epoch is None:
        return None
    return rlmm.remote_log_segment_metadata(tip, epoch, offset)


def read_remote_segment(
    spec: RemoteReadSpec,
    rlmm: RemoteLogMetadataManager,
    rsm: RemoteStorageManager,
    cache: RemoteIndexCache,
) -> RemoteReadData:
    offset = spec.fetch_offset
    epoch = epoch_for_offset(spec.epochs, offset)
    md = rlmm.remote_log_segment_metadata(spec.tip, epoch, offset) if epoch is not None else None
    if md is None:
        raise RemoteOffsetOutOfRange(
            f"Received request for offset {offset} for leader epoch "
            f"{epoch if epoch is not None else 'NOT AVAILABLE'} and partition {spec.tip} "
            "which does not exist in remote tier."
        )
    fetched = 0
    while True:
        position = cache.lookup_offset(md, offset)
        fetched_before = fetched
        stream = rsm.fetch_log_segment(md, position)
        try:
            first: bytes | None = None
            last_seen = -1
            while True:
                batch = _next_batch(stream)
                if batch is None:
                    break
                fetched += len(batch)
                last_seen = read_header(batch).last_offset
                if last_seen >= offset:
                    if not _valid(batch, md, None):
                        raise RemoteSegmentCorrupted(
                            md, f"the batch holding {offset} fails its CRC"
                        )
                    first = batch
                    break
            if first is None and last_seen < md.end_offset:
                # tiered topics are never compacted: a whole copy reaches its end offset
                raise RemoteSegmentCorrupted(
                    md, f"its data ends after offset {last_seen} (reading {offset})"
                )
            if first is None:
                nxt = _segment_for(rlmm, spec.tip, spec.epochs, md.end_offset + 1)
                if nxt is None:
                    return RemoteReadData(b"", [] if spec.read_committed else None, md, fetched)
                md = nxt
                continue
            if not spec.min_one_message and len(first) > spec.max_bytes:
                return RemoteReadData(b"", [] if spec.read_committed else None, md, fetched)
            out = [first]
            used = len(first)
            while used < spec.max_bytes:
                batch = _next_batch(stream)
                if (
                    batch is None
                    or used + len(batch) > spec.max_bytes
                    or not _valid(batch, md, read_header(out[-1]).last_offset + 1)
                ):
                    # a damaged batch ends this read; the next fetch starts there and fails
                    if batch is not None:
                        fetched += len(batch)
                    break
                fetched += len(batch)
                out.append(batch)
                used += len(batch)
        finally:
            stream.close()
        records = b"".join(out)
        _warm_next(spec, md, position + fetched - fetched_before, rlmm, rsm)
        aborted = None
        if spec.read_committed:
            upper = read_header(out[-1]).next_offset
            aborted = _aborted_txns(spec, md, upper, rlmm, cache)
        return RemoteReadData(records, aborted, md, fetched)


def _warm_next(
    spec: RemoteReadSpec,
    md: RemoteLogSegmentMetadata,
    end_position: int,
    rlmm: RemoteLogMetadataManager,
    rsm: RemoteStorageManager,
) -> None:
    """Best effort: a failure here must never fail (or delay) the read that triggered it."""
    warm = getattr(rsm, "warm", None)
    if warm is None or md.segment_size_in_bytes - end_position > WARM_WINDOW_BYTES:
        return
    try:
        nxt = _segment_for(rlmm, spec.tip, spec.epochs, md.end_offset + 1)
        if nxt is None:
            return
        key = nxt.remote_log_segment_id.id
        with _warm_lock:
            if key in _warmed:
                return
            _warmed[key] = None
            while len(_warmed) > _WARMED_REMEMBERED:
                _warmed.popitem(last=False)
        _warm_pool.submit(_warm_one, warm, nxt, spec.tip, md.end_offset)
    except Exception as e:
        log.debug("%s: warming the segment after offset %d failed: %r", spec.tip, md.end_offset, e)


def _warm_one(
    warm: Callable[[RemoteLogSegmentMetadata], object],
    nxt: RemoteLogSegmentMetadata,
    tip: TopicIdPartition,
    after: int,
) -> None:
    try:
        warm(nxt)
    except Exception as e:  # forget it, so a later read of the segment's tail tries again
        with _warm_lock:
            _warmed.pop(nxt.remote_log_segment_id.id, None)
        log.debug("%s: warming the segment after offset %d failed: %r", tip, after, e)


def _aborted_txns(
    spec: RemoteReadSpec,
    md: RemoteLogSegmentMetadata,
    upper_bound: int,
    rlmm: RemoteLogMetadataManager,
    cache: RemoteIndexCache,
) -> list[AbortedTxn]:
    """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` from this segment's
    transaction index and the following remote segments'; local segments are not consulted
    (a remote response never reaches past the remote tier's end)."""
    out: list[AbortedTxn] = []
    seg: RemoteLogSegmentMetadata | None = md
    while seg is not None and seg.start_offset < upper_bound:
        for t in cache.aborted_txns(seg):
            if t.last_offset >= spec.fetch_offset and t.first_offset < upper_bound:
                out.append(t)
        seg = _segment_for(rlmm, spec.tip, spec.epochs, seg.end_offset + 1)
    return out


def find_offset_by_timestamp(
    *,
    tip: TopicIdPartition,
    timestamp: int,
    starting_offset: int,
    epochs: Sequence[EpochEntry],
    log_end_offset: int,
    first_local_base_offset: int | None,
    rlmm: RemoteLogMetadataManager,
    rsm: RemoteStorageManager,
    cache: RemoteIndexCache,
) -> tuple[int, int, int | None] | _SearchLocal | None:
    """``(timestamp, offset, leader epoch)`` of the first record at or after ``timestamp``
    (and ``starting_offset``) in the remote tier, ``SEARCH_LOCAL`` when the matching segment
    is also local, or None when no remote segment can hold it."""
    lineage = build_filtered_leader_epoch_map(dict(epochs))
    epoch = epoch_for_offset(epochs, starting_offset)
    while epoch is not None:
        for md in rlmm.list_remote_log_segments(tip, epoch):
            if (
                md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                and md.max_timestamp_ms >= timestamp
                and md.end_offset >= starting_offset
                and is_remote_segment_within_leader_epochs(
                    md.segment_leader_epochs, md.end_offset, log_end_offset, lineage
                )
            ):
                if (
                    first_local_base_offset is not None
                    and md.start_offset >= first_local_base_offset
                ):
                    return SEARCH_LOCAL
                return _lookup_in_segment(md, timestamp, starting_offset, rsm, cache)
        epoch = next_epoch(epochs, epoch)
    return None


def _lookup_in_segment(
    md: RemoteLogSegmentMetadata,
    timestamp: int,
    starting_offset: int,
    rsm: RemoteStorageManager,
    cache: RemoteIndexCache,
) -> tuple[int, int, int | None] | None:
    position = cache.lookup_timestamp(md, timestamp, starting_offset)
    stream = rsm.fetch_log_segment(md, position)
    try:
        while (batch := _next_batch(stream)) is not None:
            h = read_header(batch)
            if h.max_timestamp < timestamp or h.last_offset < starting_offset:
                continue
            for rec in iter_records(batch, h):
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    epoch = h.partition_leader_epoch
                    return (
                        rec.timestamp,
                        rec.offset,
                        (None if epoch == NO_PARTITION_LEADER_EPOCH else epoch),
                    )
    finally:
        stream.close()
    return None
