"""The remote read path, synchronous: runs on the reader pool, never on the event loop.

One read serves one partition from exactly one remote segment (as Kafka does): find the
``COPY_SEGMENT_FINISHED`` segment covering ``(epoch for offset, offset)``, turn the offset into
a byte position with the cached offset index, stream from there skipping batches that end
below the offset, then copy whole batches up to the byte budget. A segment with no matching
batch (compacted away) moves the read to the next segment. Only whole batches are returned,
so a response never ends in a partial batch.

The plugin's own read-ahead stops at a segment boundary, so without help a catching-up
consumer would find the pipeline empty at the start of every segment and wait object-store
round trips there (manifest, index, first chunk). Plugins may offer (duck-typed, optional):

* ``read_ahead_bytes`` and ``warm(metadata, start, length)``: the reader continues the
  plugin's read-ahead window into the next segment. Once a read ends within
  ``WARM_LEAD_WINDOWS`` windows of its segment's end, the next segment's manifest and
  indexes are warmed (``length`` 0); once the window reaches past the end, each read asks
  for the part of the next segment it now covers, so the bytes in flight stay one window
  across the boundary instead of dropping to nothing and then doubling;
* only ``warm(metadata)``: called once per next segment, when a read ends within
  ``WARM_WINDOW_BYTES`` of its segment's end.

``warm`` starts with a manifest GET, a round trip the read that triggered it must not wait
for, so the calls run on a small pool of their own.

A read starting at (or before) its segment's first offset starts streaming from byte 0 while
the offset index is looked up: that is where any lookup points, so a consumer crossing into
the next segment, or starting from the beginning, waits one object-store round trip there
instead of two. The lookup must still succeed before anything is served (a missing index is
damage, reported as before).

Timestamp lookups walk the epochs from the starting offset's epoch upward and consider only
finished, in-lineage segments; when the matching segment is still present locally the caller
is told to search locally instead, which saves remote index fetches.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import BinaryIO, Final

from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import (
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    RECORDS_OFFSET,
    BatchHeader,
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

#: For plugins without ``read_ahead_bytes``: reads ending this close to their segment's end
#: warm the next segment (the object-store plugin's default read-ahead).
WARM_WINDOW_BYTES = 16 * 1024 * 1024
#: With ``read_ahead_bytes``: the next segment's manifest and indexes are warmed once a read
#: ends within this many read-ahead windows of its segment's end. A window is what the
#: reader consumes per object-store round trip when the store is the limit, so this leaves
#: about two round trips (manifest, then indexes) before the window reaches the boundary.
WARM_LEAD_WINDOWS = 3

log = logging.getLogger(__name__)

_WARM_THREADS = 4
_WARMED_REMEMBERED = 4096
_warm_pool = ThreadPoolExecutor(_WARM_THREADS, thread_name_prefix="remote-log-warm")
#: Index lookups that run alongside a read entering a segment at its first batch. Their own
#: pool: queued behind warm calls (each a manifest GET) they would delay that read.
_lookup_pool = ThreadPoolExecutor(8, thread_name_prefix="remote-log-lookup")
_warm_lock = threading.Lock()
#: Segments already handed to ``warm``, with the bytes from their start asked for so far
#: (bounded, oldest forgotten first).
_warmed: OrderedDict[uuid.UUID, int] = OrderedDict()


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


def _checked(
    buf: memoryview, pos: int, end: int, md: RemoteLogSegmentMetadata, expected_base: int | None
) -> BatchHeader | None:
    """The header of the batch at ``buf[pos:end]`` if it passes its CRC (computed over the
    buffer in place) and the offset checks the CRC does not cover: inside the segment, and
    contiguous with the previous batch (tiered topics are never compacted)."""
    try:
        h = check_batch(buf, pos, end, verify_crc=True)
    except RecordsError:
        return None
    if expected_base is not None and h.base_offset != expected_base:
        return None
    if not md.start_offset <= h.base_offset <= h.last_offset <= md.end_offset:
        return None
    return h


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
    records: bytes | memoryview
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


class _Cursor:
    """A plugin stream over one remote segment, at a batch boundary, plus the bytes already
    read from it but not yet served (``carry``). Parked between Fetches, it lets a consumer
    reading sequentially continue where its previous Fetch stopped: no new stream, no index
    lookup, no chunk looked up and mapped again, no read-ahead rescheduled."""

    __slots__ = ("carry", "md", "position", "rsm", "stream", "used_at")

    def __init__(
        self,
        md: RemoteLogSegmentMetadata,
        rsm: RemoteStorageManager,
        stream: BinaryIO,
        position: int,
    ) -> None:
        self.md = md
        self.rsm = rsm
        self.stream = stream
        self.position = position  # segment position of the first unserved byte
        self.carry: memoryview = memoryview(b"")
        self.used_at = 0.0

    def read(self, n: int) -> memoryview:
        """The next ``n`` bytes as one buffer (fewer only where the stream ends), consumed:
        one copy from the plugin's chunk into a buffer the Fetch response can send as is."""
        if len(self.carry) >= n:
            out = self.carry[:n]
            self.carry = self.carry[n:]
        else:
            buf = memoryview(bytearray(n))
            got = len(self.carry)
            buf[:got] = self.carry
            self.carry = memoryview(b"")
            readinto: Callable[[memoryview], int | None] | None = getattr(
                self.stream, "readinto", None
            )
            while got < n:
                if readinto is not None:
                    k = readinto(buf[got:]) or 0
                else:  # a plugin stream that only offers read()
                    part = self.stream.read(n - got)
                    k = len(part)
                    buf[got : got + k] = part
                if not k:
                    break
                got += k
            out = buf[:got]
        self.position += len(out)
        return out

    def unread(self, tail: memoryview) -> None:
        """Give back the end of what ``read`` returned, to be served first next time."""
        if not tail:
            return
        self.position -= len(tail)  # the carry already held is not counted in position
        if self.carry:
            tail = memoryview(bytes(tail) + bytes(self.carry))
        elif 2 * len(tail) < len(memoryview(tail.obj)):  # do not pin a large buffer for a tail
            tail = memoryview(bytes(tail))
        self.carry = tail

    def close(self) -> None:
        try:
            self.stream.close()
        except Exception as e:  # closing only cancels read-ahead; nothing to report
            log.debug("closing a remote segment stream failed: %r", e)


#: Parked cursors, keyed by (partition, offset of the next batch). Bounded in number and
#: idle time: each holds its carry (under one batch) and the plugin stream's current chunk.
_PARKED_MAX = 16
_PARKED_IDLE_S = 30.0
_parked_lock = threading.Lock()
_parked: OrderedDict[tuple[TopicIdPartition, int], _Cursor] = OrderedDict()


def _unpark(
    rsm: RemoteStorageManager, tip: TopicIdPartition, md: RemoteLogSegmentMetadata, offset: int
) -> _Cursor | None:
    """The cursor a previous read left at ``offset`` of this very segment, taken (so two
    concurrent reads never share one); None if there is none."""
    with _parked_lock:
        cursor = _parked.pop((tip, offset), None)
    if cursor is None:
        return None
    if (
        cursor.rsm is rsm
        and cursor.md.remote_log_segment_id == md.remote_log_segment_id
        and time.monotonic() - cursor.used_at <= _PARKED_IDLE_S
    ):
        return cursor
    cursor.close()
    return None


def _park(cursor: _Cursor, tip: TopicIdPartition, next_offset: int) -> None:
    now = time.monotonic()
    cursor.used_at = now
    dropped: list[_Cursor] = []
    with _parked_lock:
        old = _parked.pop((tip, next_offset), None)
        if old is not None:
            dropped.append(old)
        _parked[(tip, next_offset)] = cursor
        while len(_parked) > _PARKED_MAX:
            dropped.append(_parked.popitem(last=False)[1])
        while _parked:
            key, oldest = next(iter(_parked.items()))
            if now - oldest.used_at <= _PARKED_IDLE_S:
                break
            del _parked[key]
            dropped.append(oldest)
    for c in dropped:
        c.close()


def forget_parked_reads(rsm: RemoteStorageManager | None = None) -> None:
    """Close the parked cursors of ``rsm`` (all when None), e.g. when it is closed."""
    with _parked_lock:
        keys = [k for k, c in _parked.items() if rsm is None or c.rsm is rsm]
        dropped = [_parked.pop(k) for k in keys]
    for c in dropped:
        c.close()


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
        cursor = _unpark(rsm, spec.tip, md, offset)
        lookup: Future[int] | None = None
        if cursor is None:
            if offset <= md.start_offset:
                # byte 0 whatever the index says; the lookup still has to succeed (a missing
                # index is damage to report) but runs alongside the first chunk's GET
                position = 0
                lookup = _lookup_pool.submit(cache.lookup_offset, md, offset)
            else:
                position = cache.lookup_offset(md, offset)
            cursor = _Cursor(md, rsm, rsm.fetch_log_segment(md, position), position)
            if hasattr(rsm, "read_ahead_bytes"):
                # before this read waits for its first chunk: the next segment's manifest and
                # indexes take round trips of their own, which can overlap that wait
                _warm_next(spec, md, position, rlmm, rsm)
        parked = False
        try:
            before = cursor.position
            size, last_seen = _skip_to(cursor, offset)
            fetched += cursor.position - before
            if size is None and last_seen < md.end_offset:
                # tiered topics are never compacted: a whole copy reaches its end offset
                raise RemoteSegmentCorrupted(
                    md, f"its data ends after offset {last_seen} (reading {offset})"
                )
            if lookup is not None:
                lookup.result()  # raises what an inline lookup would have raised
            if size is None:
                nxt = _segment_for(rlmm, spec.tip, spec.epochs, md.end_offset + 1)
                if nxt is None:
                    return RemoteReadData(b"", [] if spec.read_committed else None, md, fetched)
                md = nxt
                continue
            if not spec.min_one_message and size > spec.max_bytes:
                _park(cursor, spec.tip, offset)
                parked = True
                return RemoteReadData(b"", [] if spec.read_committed else None, md, fetched)
            want = spec.max_bytes
            if md.segment_size_in_bytes > cursor.position:  # no buffer beyond the segment
                want = min(want, md.segment_size_in_bytes - cursor.position)
            window = cursor.read(max(size, want))
            served, last = _whole_valid_batches(window, md)
            if served == 0:
                if len(window) < size:
                    raise RemoteSegmentCorrupted(
                        md, f"its data ends inside the batch holding {offset}"
                    )
                raise RemoteSegmentCorrupted(md, f"the batch holding {offset} fails its CRC")
            # a damaged batch after the first ends this read; the next fetch starts there
            # (from the parked carry) and fails
            cursor.unread(window[served:])
            fetched += served
            records = window[:served]
            if last < md.end_offset:
                _park(cursor, spec.tip, last + 1)
                parked = True
        finally:
            if not parked:
                cursor.close()
        _warm_next(spec, md, cursor.position, rlmm, rsm)
        aborted = None
        if spec.read_committed:
            aborted = _aborted_txns(spec, md, last + 1, rlmm, cache)
        return RemoteReadData(records, aborted, md, fetched)


def _skip_to(cursor: _Cursor, offset: int) -> tuple[int | None, int]:
    """Move ``cursor`` to the batch holding ``offset`` (the index points at or before it)
    reading only batch headers; its size, or None where the data ends, and the last offset
    of the batches passed over."""
    last_seen = -1
    while True:
        head = cursor.read(RECORDS_OFFSET)
        if len(head) < LOG_OVERHEAD:
            return None, last_seen
        _base, length = _PREFIX.unpack_from(head)
        if length < RECORDS_OFFSET - LOG_OVERHEAD or len(head) < RECORDS_OFFSET:
            return None, last_seen  # trailing garbage or preallocated zeros: the end
        size = LOG_OVERHEAD + length
        h = read_header(head)
        cursor.unread(head)
        if h.last_offset >= offset:
            return size, last_seen
        last_seen = h.last_offset
        if len(cursor.read(size)) < size:
            return None, last_seen


def _whole_valid_batches(window: memoryview, md: RemoteLogSegmentMetadata) -> tuple[int, int]:
    """Bytes of the whole, valid, contiguous batches at the start of ``window``, and the
    last offset among them (-1 if none)."""
    pos = 0
    last = -1
    expected: int | None = None
    n = len(window)
    while pos + LOG_OVERHEAD <= n:
        _base, length = _PREFIX.unpack_from(window, pos)
        if length < RECORDS_OFFSET - LOG_OVERHEAD or pos + LOG_OVERHEAD + length > n:
            break
        h = _checked(window, pos, pos + LOG_OVERHEAD + length, md, expected)
        if h is None:
            break
        pos += LOG_OVERHEAD + length
        last = h.last_offset
        expected = last + 1
    return pos, last


def _warm_next(
    spec: RemoteReadSpec,
    md: RemoteLogSegmentMetadata,
    end_position: int,
    rlmm: RemoteLogMetadataManager,
    rsm: RemoteStorageManager,
) -> None:
    """Best effort: a failure here must never fail (or delay) the read that triggered it."""
    warm = getattr(rsm, "warm", None)
    if warm is None:
        return
    window: int | None = getattr(rsm, "read_ahead_bytes", None)
    remaining = md.segment_size_in_bytes - end_position
    if window is None:
        if remaining > WARM_WINDOW_BYTES:
            return
    elif remaining > WARM_LEAD_WINDOWS * window:
        return
    try:
        nxt = _segment_for(rlmm, spec.tip, spec.epochs, md.end_offset + 1)
        if nxt is None:
            return
        key = nxt.remote_log_segment_id.id
        # bytes of the next segment inside the window that starts where this read ended
        wanted = max(0, window - remaining) if window is not None else 0
        with _warm_lock:
            asked = _warmed.get(key)
            if asked is not None and (window is None or wanted <= asked):
                return
            _warmed[key] = wanted
            _warmed.move_to_end(key)
            while len(_warmed) > _WARMED_REMEMBERED:
                _warmed.popitem(last=False)
        if window is None:
            call: Callable[[], object] = partial(warm, nxt)
        elif asked is None:  # first: manifest and indexes, and the window's part if any
            call = partial(warm, nxt, 0, wanted)
        else:
            call = partial(warm, nxt, asked, wanted - asked)
        _warm_pool.submit(_warm_one, call, nxt, spec.tip, md.end_offset)
    except Exception as e:
        log.debug("%s: warming the segment after offset %d failed: %r", spec.tip, md.end_offset, e)


def _warm_one(
    call: Callable[[], object],
    nxt: RemoteLogSegmentMetadata,
    tip: TopicIdPartition,
    after: int,
) -> None:
    try:
        call()
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
