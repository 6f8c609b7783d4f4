"""The remote read path, synchronous: runs on the manager's reader pool, never on the event loop.

One read serves one partition from exactly one remote segment (as Kafka does): find the
``COPY_SEGMENT_FINISHED`` segment covering ``(epoch for offset, offset)``, turn the offset into
a byte position with the cached offset index, stream from there skipping batches that end
below the offset, then copy whole batches up to the byte budget. A segment with no matching
batch (compacted away) moves the read to the next segment. Only whole batches are returned,
so a response never ends in a partial batch.

A ``RemoteReader`` belongs to one ``RemoteLogManager`` and holds everything reads share: the
cursors parked between Fetches (``remote_cursor``), the warming of the next segment for a
plugin that ``SupportsReadAhead`` (``next_segment_warming``) and the pool of index lookups.
It is created and closed with its manager, and no state is shared between readers.

A read starting at (or before) its segment's first offset starts streaming from byte 0 while
the offset index is looked up: that is where any lookup points, so a consumer crossing into
the next segment, or starting from the beginning, waits one object-store round trip there
instead of two. The lookup must still succeed before anything is served (a missing index is
damage, reported as an inline lookup reports it). Those lookups have a pool of their own:
queued behind warm calls (each a manifest GET) they would delay that read.

Timestamp lookups walk the epochs from the starting offset's epoch upward and consider only
finished, in-lineage segments; when the matching segment is still present locally the caller
is told to search locally instead, which saves remote index fetches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Final

from tierlog.log.txn_index import AbortedTxn, collect_aborted
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import (
    NO_PARTITION_LEADER_EPOCH,
    RECORDS_OFFSET,
    header_at,
    iter_records,
    next_offset_after,
    valid_batches_prefix,
)
from tierlog.tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    SupportsReadAhead,
    TopicIdPartition,
)
from tierlog.tiered.manager.index_cache import RemoteIndexCache
from tierlog.tiered.manager.lineage import (
    EpochEntry,
    build_filtered_leader_epoch_map,
    epoch_for_offset,
    is_remote_segment_within_leader_epochs,
    next_epoch,
)
from tierlog.tiered.manager.next_segment_warming import NextSegmentWarmer
from tierlog.tiered.manager.remote_cursor import ParkedCursors, SegmentCursor

__all__ = [
    "SEARCH_LOCAL",
    "RemoteOffsetOutOfRange",
    "RemoteReadData",
    "RemoteReadSpec",
    "RemoteReader",
    "RemoteSegmentCorrupted",
]

log = logging.getLogger(__name__)

_LOOKUP_THREADS = 8


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


@dataclass(frozen=True)
class RemoteReadSpec:
    tip: TopicIdPartition
    fetch_offset: int
    max_bytes: int
    min_one_message: bool
    epochs: Sequence[EpochEntry]
    read_committed: bool = False
    local_aborted: Callable[[int, int], list[AbortedTxn]] | None = None
    """read_committed: the aborted transactions of every local segment overlapping
    ``[fetch_offset, upper_bound)``, searched once the remote segments run out."""


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


@dataclass(frozen=True)
class _Served:
    """What one segment gave a read: ``records`` None when its data ends before the offset
    (the read moves on to the next segment); ``last`` -1 when nothing was served."""

    records: bytes | memoryview | None
    last: int
    fetched: int
    end_position: int


class RemoteReader:
    """Reads of one manager's remote tier, and the state they share; see the module doc.

    Thread-safe: reads run concurrently on the manager's reader pool.
    """

    def __init__(
        self,
        rlmm: RemoteLogMetadataManager,
        rsm: RemoteStorageManager,
        cache: RemoteIndexCache,
    ) -> None:
        self._rlmm = rlmm
        self._rsm = rsm
        self._cache = cache
        self.parked = ParkedCursors()
        self._warmer = NextSegmentWarmer(rsm) if isinstance(rsm, SupportsReadAhead) else None
        self._lookups = ThreadPoolExecutor(_LOOKUP_THREADS, thread_name_prefix="remote-log-lookup")

    def close(self) -> None:
        """Close the parked cursors and stop the pools; idempotent."""
        self.parked.close()
        if self._warmer is not None:
            self._warmer.close()
        self._lookups.shutdown(wait=False, cancel_futures=True)

    # --- Fetch ----------------------------------------------------------------------------

    def read(self, spec: RemoteReadSpec) -> RemoteReadData:
        """Whole batches from the remote segment holding ``spec.fetch_offset`` (or the first
        later segment with any); raises ``RemoteOffsetOutOfRange`` when no segment covers
        the offset and ``RemoteSegmentCorrupted`` where the data needed is damaged."""
        md = self._first_segment(spec)
        no_aborted: list[AbortedTxn] | None = [] if spec.read_committed else None
        fetched = 0
        while True:
            served = self._read_segment(spec, md)
            fetched += served.fetched
            if served.records is not None:
                break
            nxt = self._segment_for(spec, md.end_offset + 1)
            if nxt is None:
                return RemoteReadData(b"", no_aborted, md, fetched)
            md = nxt
        if served.last < 0:
            return RemoteReadData(served.records, no_aborted, md, fetched)
        self._warm_next(spec, md, served.end_position)
        aborted = None
        if spec.read_committed:
            aborted = self._aborted_txns(spec, md, served.last + 1)
        return RemoteReadData(served.records, aborted, md, fetched)

    def read_ready(
        self, spec: RemoteReadSpec, on_readable: Callable[[], None] | None = None
    ) -> tuple[RemoteReadData | None, bool]:
        """The read, if a cursor parked at the offset already holds its first batch whole in
        memory, or its stream has the next chunk in memory (``read_view_now``); else None,
        and ``read`` must do it (on the reader pool), unless the chunk the cursor needs is
        on its way: then, with ``on_readable``, that is called when its GET ends (the
        second value is True) and calling this again then answers. Never blocks: no plugin
        call that can wait, so the event loop can call it and answer a sequential
        consumer without two thread hand-offs per Fetch (which, more than CPU, pace a
        consumer that keeps one Fetch in flight). Whatever is unusual (a batch across the
        chunk boundary, the segment's last batch, damage, aborted transactions to look up in
        a remote transaction index) is left to ``read``, which decides and reports it;
        nothing is consumed from the cursor then.

        read_committed is served here when no remote transaction index from this segment on
        has to be loaded: the aborted transactions then come from the local log alone."""
        offset = spec.fetch_offset
        try:
            md = self._first_segment(spec)
            if spec.read_committed and (
                not md.txn_idx_empty
                or self._next_with_txn_index(spec, md.end_offset + 1) is not None
            ):
                return None, False
        except Exception:  # no segment, metadata still loading...: ``read`` reports it
            return None, False
        cursor = self.parked.take(spec.tip, md, offset)
        if cursor is None:
            return None, False
        if not self._first_batch_now(cursor):  # it needs a chunk not in memory yet
            arranged = on_readable is not None and cursor.when_readable(on_readable)
            self.parked.park(cursor, spec.tip, offset)
            return None, arranged
        served, last = self._ready_bytes(spec, md, cursor)
        if served == 0 or last >= md.end_offset:
            self.parked.park(cursor, spec.tip, offset)
            return None, False
        records = cursor.read(served)  # within the carry: a view, nothing read
        self.parked.park(cursor, spec.tip, last + 1)
        self._warm_next(spec, md, cursor.position)
        # read_committed got here only with no remote transaction index from ``md`` on, so
        # what ``_aborted_txns`` would find is the local log's alone
        aborted = self._local_aborted(spec, last + 1) if spec.read_committed else None
        return RemoteReadData(records, aborted, md, served), False

    def unread(self, spec: RemoteReadSpec, records: bytes | memoryview) -> None:
        """Give back what a read at ``spec`` returned that its Fetch never sent (it stopped
        waiting, ``abandoned_reads``): the records go back in front of the cursor the read
        parked after them, and the cursor is parked at the read's offset, so the next Fetch
        there is served them (on the event loop, ``read_ready``) instead of opening a second
        stream over the segment. Nothing happens if that cursor is gone (the segment's end
        closed it, or it was continued or evicted meanwhile)."""
        after = next_offset_after(records)
        if after is None:
            return
        md = self._segment_for(spec, after - 1)
        if md is None:
            return
        cursor = self.parked.take(spec.tip, md, after)
        if cursor is None:
            return
        cursor.unread(memoryview(records))
        self.parked.park(cursor, spec.tip, spec.fetch_offset)

    @staticmethod
    def _first_batch_now(cursor: SegmentCursor) -> bool:
        """Whether the cursor's carry holds the whole batch it starts with, taking what
        the stream has in memory (``SegmentCursor.fill_now``): the rest of its chunk, and
        for the batch across a chunk boundary the next chunk if it has landed."""
        if not cursor.fill_now(RECORDS_OFFSET):
            return False
        h = header_at(cursor.carry)
        return h is None or h.size <= len(cursor.carry) or cursor.fill_now(h.size)

    @staticmethod
    def _ready_bytes(
        spec: RemoteReadSpec, md: RemoteLogSegmentMetadata, cursor: SegmentCursor
    ) -> tuple[int, int]:
        """Bytes of whole valid batches at the start of ``cursor``'s carry that answer
        ``spec`` as ``_serve`` would, and their last offset; (0, -1) if the carry cannot."""
        carry = cursor.carry
        h = header_at(carry)
        if (
            h is None
            or h.size > len(carry)
            or not h.base_offset <= spec.fetch_offset <= h.last_offset
            or (not spec.min_one_message and h.size > spec.max_bytes)
        ):
            return 0, -1
        want = spec.max_bytes
        if md.segment_size_in_bytes > cursor.position:
            want = min(want, md.segment_size_in_bytes - cursor.position)
        return _whole_valid_batches(carry[: max(h.size, min(want, len(carry)))], md)

    def _first_segment(self, spec: RemoteReadSpec) -> RemoteLogSegmentMetadata:
        offset = spec.fetch_offset
        epoch = epoch_for_offset(spec.epochs, offset)
        md = (
            None
            if epoch is None
            else self._rlmm.remote_log_segment_metadata(spec.tip, epoch, offset)
        )
        if md is None:
            raise RemoteOffsetOutOfRange(
                f"Received request for offset {offset} for leader epoch "
                f"{epoch if epoch is not None else 'NOT AVAILABLE'} and partition {spec.tip} "
                "which does not exist in remote tier."
            )
        return md

    def _next_with_txn_index(
        self, spec: RemoteReadSpec, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The first remote segment at or after ``offset`` that has a transaction index,
        through the epochs from the one holding ``offset``."""
        epoch = epoch_for_offset(spec.epochs, offset)
        while epoch is not None:
            md = self._rlmm.next_segment_with_txn_index(spec.tip, epoch, offset)
            if md is not None:
                return md
            epoch = next_epoch(spec.epochs, epoch)
        return None

    def _segment_for(self, spec: RemoteReadSpec, offset: int) -> RemoteLogSegmentMetadata | None:
        epoch = epoch_for_offset(spec.epochs, offset)
        if epoch is None:
            return None
        return self._rlmm.remote_log_segment_metadata(spec.tip, epoch, offset)

    def _read_segment(self, spec: RemoteReadSpec, md: RemoteLogSegmentMetadata) -> _Served:
        """Serve from ``md``; the cursor used is parked where the next read may continue it,
        or closed."""
        cursor, lookup = self._cursor_for(spec, md)
        try:
            served, park_at = self._serve(spec, md, cursor, lookup)
        except BaseException:
            cursor.close()
            raise
        if park_at is None:
            cursor.close()
        else:
            self.parked.park(cursor, spec.tip, park_at)
        return served

    def _cursor_for(
        self, spec: RemoteReadSpec, md: RemoteLogSegmentMetadata
    ) -> tuple[SegmentCursor, Future[int] | None]:
        """A cursor at or before the batch holding the offset: the parked one, or a new
        stream; with the index lookup still running beside it, if any."""
        offset = spec.fetch_offset
        cursor = self.parked.take(spec.tip, md, offset)
        if cursor is not None:
            return cursor, None
        lookup: Future[int] | None = None
        if offset <= md.start_offset:
            # byte 0 whatever the index says; the lookup still has to succeed (a missing
            # index is damage to report) but runs alongside the first chunk's GET
            position = 0
            lookup = self._lookups.submit(self._cache.lookup_offset, md, offset)
        else:
            position = self._cache.lookup_offset(md, offset)
        cursor = SegmentCursor(md, self._rsm.fetch_log_segment(md, position), position)
        # before this read waits for its first chunk: the next segment's manifest and
        # indexes take round trips of their own, which can overlap that wait
        self._warm_next(spec, md, position)
        return cursor, lookup

    def _serve(
        self,
        spec: RemoteReadSpec,
        md: RemoteLogSegmentMetadata,
        cursor: SegmentCursor,
        lookup: Future[int] | None,
    ) -> tuple[_Served, int | None]:
        """Read the batches to serve from ``cursor``; with the offset to park it at (None:
        close it)."""
        offset = spec.fetch_offset
        before = cursor.position
        size, last_seen = _skip_to(cursor, offset)
        fetched = cursor.position - before
        if size is None and last_seen < md.end_offset:
            # tiered topics are never compacted: a whole copy reaches its end offset
            raise RemoteSegmentCorrupted(
                md, f"its data ends after offset {last_seen} (reading {offset})"
            )
        if lookup is not None:
            lookup.result()  # raises what an inline lookup would have raised
        if size is None:
            return _Served(None, -1, fetched, cursor.position), None
        if not spec.min_one_message and size > spec.max_bytes:
            return _Served(b"", -1, fetched, cursor.position), offset
        want = spec.max_bytes
        if md.segment_size_in_bytes > cursor.position:  # no buffer beyond the segment
            want = min(want, md.segment_size_in_bytes - cursor.position)
        # up to ``want``, but no copy beyond the batch that spans a chunk boundary
        window = cursor.read(max(size, want), need=size)
        served, last = _whole_valid_batches(window, md)
        if served == 0:
            if len(window) < size:
                raise RemoteSegmentCorrupted(md, f"its data ends inside the batch holding {offset}")
            raise RemoteSegmentCorrupted(md, f"the batch holding {offset} fails its CRC")
        # a damaged batch after the first ends this read; the next fetch starts there
        # (from the parked carry) and fails
        cursor.unread(window[served:])
        park_at = last + 1 if last < md.end_offset else None
        return _Served(window[:served], last, fetched + served, cursor.position), park_at

    def _warm_next(self, spec: RemoteReadSpec, md: RemoteLogSegmentMetadata, end: int) -> None:
        if self._warmer is not None:
            self._warmer.after_read(
                spec.tip, md, end, lambda m: self._segment_for(spec, m.end_offset + 1)
            )

    def _aborted_txns(
        self, spec: RemoteReadSpec, md: RemoteLogSegmentMetadata, upper_bound: int
    ) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (Kafka's
        ``collectAbortedTransactions``): from this segment's remote transaction index and
        each following remote segment's, then every local segment's, until an entry's LSO
        reaches ``upper_bound``. An abort whose marker lies in a later segment than its data
        is found that way, also when that segment is still only local. Segments uploaded with
        an empty transaction index are skipped without loading anything (Kafka's
        ``findNextSegmentWithTxnIndex``). Deduplicated: a segment both remote and local is
        searched twice."""
        out: list[AbortedTxn] = []
        seg: RemoteLogSegmentMetadata | None = md
        while seg is not None:
            if not seg.txn_idx_empty and collect_aborted(
                self._cache.aborted_txns(seg), spec.fetch_offset, upper_bound, out
            ):
                return list(dict.fromkeys(out))
            seg = self._next_with_txn_index(spec, seg.end_offset + 1)
        out.extend(self._local_aborted(spec, upper_bound))
        return list(dict.fromkeys(out))

    @staticmethod
    def _local_aborted(spec: RemoteReadSpec, upper_bound: int) -> list[AbortedTxn]:
        """The local log's aborted transactions overlapping ``[fetch_offset, upper_bound)``:
        ``_aborted_txns`` where no remote segment from the one read on has an index."""
        if spec.local_aborted is None:
            return []
        return list(dict.fromkeys(spec.local_aborted(spec.fetch_offset, upper_bound)))

    # --- ListOffsets ----------------------------------------------------------------------

    def find_offset_by_timestamp(
        self,
        *,
        tip: TopicIdPartition,
        timestamp: int,
        starting_offset: int,
        epochs: Sequence[EpochEntry],
        log_end_offset: int,
        first_local_base_offset: int | None,
    ) -> tuple[int, int, int | None] | _SearchLocal | None:
        """``(timestamp, offset, leader epoch)`` of the first record at or after
        ``timestamp`` (and ``starting_offset``) in the remote tier, ``SEARCH_LOCAL`` when the
        matching segment is also local, or None when no remote segment can hold it."""
        lineage = build_filtered_leader_epoch_map(dict(epochs))
        epoch = epoch_for_offset(epochs, starting_offset)
        while epoch is not None:
            for md in self._rlmm.list_remote_log_segments(tip, epoch):
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
                    return self._lookup_in_segment(md, timestamp, starting_offset)
            epoch = next_epoch(epochs, epoch)
        return None

    def _lookup_in_segment(
        self, md: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int | None] | None:
        position = self._cache.lookup_timestamp(md, timestamp, starting_offset)
        stream = self._rsm.fetch_log_segment(md, position)
        try:
            while (batch := _next_batch(stream)) is not None:
                h = header_at(batch)
                assert h is not None  # _next_batch returns whole batches only
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
    """The next whole batch of ``stream``; None where the batches end."""
    head = _read_exact(stream, RECORDS_OFFSET)
    h = None if head is None else header_at(head)
    if head is None or h is None:
        return None
    rest = _read_exact(stream, h.size - RECORDS_OFFSET)
    return None if rest is None else head + rest


def _skip_to(cursor: SegmentCursor, offset: int) -> tuple[int | None, int]:
    """Move ``cursor`` to the batch holding ``offset`` (the index points at or before it)
    reading only batch headers; its size, or None where the data ends, and the last offset
    of the batches passed over."""
    last_seen = -1
    while True:
        head = cursor.read(RECORDS_OFFSET)
        h = header_at(head)
        if h is None:
            return None, last_seen
        cursor.unread(head)
        if h.last_offset >= offset:
            return h.size, last_seen
        last_seen = h.last_offset
        if len(cursor.read(h.size)) < h.size:
            return None, last_seen


def _whole_valid_batches(window: memoryview, md: RemoteLogSegmentMetadata) -> tuple[int, int]:
    """Bytes of the whole, valid, contiguous batches at the start of ``window``, and the
    last offset among them (-1 if none): each passes its CRC (computed over the buffer in
    place) and the offset checks the CRC does not cover, inside the segment and contiguous
    with the previous batch (tiered topics are never compacted)."""
    return valid_batches_prefix(window, md.start_offset, md.end_offset)
