"""One partition's log: ordered segments, offsets, appends, reads, recovery and retention.

Offsets kept here (spec §1.1):

* ``log_start_offset``: first offset visible to clients, across both tiers;
* ``local_log_start_offset``: first offset held locally, always >= ``log_start_offset``;
* ``log_end_offset`` (LEO): next offset to assign; in single-node mode (no replicas) the
  high watermark equals it, except that an append whose ``flush.messages`` fsync is
  deferred holds it at that append's first offset until the fsync is done;
* ``last_stable_offset`` (LSO): the first offset of the earliest transaction still open (or
  completed with its marker not yet below the HW), else the HW; read_committed reads stop
  there;
* ``highest_offset_in_remote_storage``: last offset known uploaded, -1 until then, never
  decreasing;
* ``recovery_point``: everything below it is fsynced and was validated, so recovery after a
  crash starts at the segment holding it.

Locking: mutations hold ``self._lock``. Reads take it only to snapshot the segment list and
sizes, then ``pread`` outside it; a segment removed by retention keeps its fd open until its
delayed deletion, so a read in flight never hits a closed file.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tierlog.fsutil import atomic_write, fsync_dir
from tierlog.log.checkpoint import read_partition_metadata, write_partition_metadata
from tierlog.log.cleaner.keys import require_keys
from tierlog.log.cleaner.swap import cleaned_to_swap, recover_interrupted_swap, swap_to_final
from tierlog.log.config import LogConfig
from tierlog.log.errors import KafkaStorageError, LogAppendError, OffsetOutOfRange
from tierlog.log.file_slice import FileSlice
from tierlog.log.index import CorruptIndexError
from tierlog.log.leader_epoch import LeaderEpochCache
from tierlog.log.names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    TopicPartition,
    offset_from_file_name,
)
from tierlog.log.producer_state import (
    CompletedTxn,
    ProducerEntry,
    ProducerStateError,
    ProducerStateManager,
)
from tierlog.log.segment import BatchInfo, LogSegment
from tierlog.log.txn_index import AbortedTxn, collect_aborted
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import (
    RECORDS_OFFSET,
    BatchHeader,
    RecordsError,
    next_offset_after,
    scan_batches,
    set_base_offset,
    set_log_append_time_split,
    set_partition_leader_epoch,
    validate_client_batch,
)
from tierlog.protocol.txn_markers import (
    ControlRecordType,
    EndTxnMarker,
    build_marker_batch,
    marker_of_batch,
)

log = logging.getLogger(__name__)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False
    """The batch repeated one already in the log; the offsets are the original ones."""
    records_count: int = 0
    size: int = 0
    flush_offset: int | None = None
    """Set when a deferred-flush append reached ``flush.messages``: the caller runs
    ``flush_to(flush_offset)`` off the event loop and acknowledges the append only after it."""


@dataclass(frozen=True, slots=True)
class _FlushOwed:
    """An append that waits for a deferred flush: where it starts, and what must be durable
    before it (and anything after it) may be read."""

    first_offset: int
    flush_offset: int
    segment_base: int
    position: int


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole batches read for a Fetch: their bytes, or with ``read(zero_copy=True)`` the
    ``FileSlice`` a connection sends without reading them."""

    chunks: list[bytes | memoryview | FileSlice]
    size: int
    first_batch_offset: int = -1

    def to_bytes(self) -> bytes:
        return b"".join(bytes(c) if isinstance(c, FileSlice) else c for c in self.chunks)


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """Read-only view of a segment for the tiering layer."""

    base_offset: int
    next_offset: int
    """Base offset of the next segment (or the LEO for the active one)."""
    size: int
    largest_timestamp: int
    log_path: Path
    offset_index_path: Path
    time_index_path: Path
    txn_index_path: Path
    """May not exist: created by the first abort marker in the segment."""
    is_active: bool

    @property
    def end_offset(self) -> int:
        return self.next_offset - 1


@dataclass(slots=True)
class _PendingDelete:
    due_ms: int
    segment: LogSegment
    paths: list[Path] = field(default_factory=list)


INTERNAL_TOPICS = frozenset(
    {"__consumer_offsets", "__transaction_state", "__remote_log_metadata", "__cluster_metadata"}
)


class PartitionLog:
    def __init__(
        self,
        tp: TopicPartition,
        directory: Path,
        config: LogConfig,
        *,
        topic_id: uuid.UUID | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        had_clean_shutdown: bool = True,
        remote_enabled: bool = False,
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.tp = tp
        self.dir = directory
        self.config = config
        self.remote_enabled = remote_enabled
        self._clock = clock
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self.closed = False
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[_PendingDelete] = []
        self._jitter_ms = self._new_jitter()
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        # deferred flushes not yet durable, oldest first; the oldest one caps the HW
        self._flushes_owed: deque[_FlushOwed] = deque()
        self._hw_cap: _FlushOwed | None = None
        # set by the replication layer in cluster mode only; None: HW follows the LEO
        self._replicated_hw: int | None = None
        self.highest_offset_in_remote_storage = -1
        directory.mkdir(parents=True, exist_ok=True)
        meta_path = directory / PARTITION_METADATA
        stored_id = read_partition_metadata(meta_path)
        if topic_id is not None and stored_id != topic_id:
            write_partition_metadata(meta_path, topic_id)
            stored_id = topic_id
        self.topic_id = stored_id
        self.leader_epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.producer_state = ProducerStateManager(directory)
        self._load(recovery_point, log_start_offset, had_clean_shutdown)

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Give a log without a topic id the one its topic has (Kafka's ``assignTopicId``).

        A broker killed after a partition's directory was created and before its
        ``partition.metadata`` landed opens that log without an id at its next start, and
        tiered storage cannot name a partition without one. A log that has another id
        belongs to a different incarnation of the topic: that is refused."""
        with self._lock:
            if self.topic_id == topic_id:
                return
            if self.topic_id is not None:
                raise ValueError(f"{self.tp} has topic id {self.topic_id}, not {topic_id}")
            write_partition_metadata(self.dir / PARTITION_METADATA, topic_id)
            self.topic_id = topic_id

    # -- properties ----------------------------------------------------------------------

    @property
    def remote_copy_enabled(self) -> bool:
        """Tiered with uploads on: local deletion waits for uploads, local.* retention."""
        return self.remote_enabled and not self.config.remote_log_copy_disable

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        """The LEO, held back at the first offset of an append that ``flush.messages`` made
        wait for its fsync until that fsync is done: as in Kafka, where such an append flushes
        before the HW moves, no reader sees records that a crash could still take back."""
        leo = self.log_end_offset
        cap = self._hw_cap
        hw = leo if cap is None else min(leo, cap.first_offset)
        replicated = self._replicated_hw
        return hw if replicated is None else min(hw, replicated)

    @property
    def last_stable_offset(self) -> int:
        """The first unstable offset (clamped to the log start) if below the HW, else the HW:
        the LSO never exceeds the HW (Kafka's invariant), also while a deferred flush holds
        the HW back."""
        with self._lock:
            hw = self.high_watermark
            first = self.producer_state.first_unstable_offset(hw)
            if first is None:
                return hw
            return min(max(first, self.log_start_offset), hw)

    @property
    def replicated(self) -> bool:
        """The replication layer owns the high watermark (``set_high_watermark``)."""
        return self._replicated_hw is not None

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        """Bytes held locally."""
        return sum(s.size for s in self._segments)

    # -- loading and recovery ---------------------------------------------------------------

    def _new_jitter(self) -> int:
        j = self.config.segment_jitter_ms
        return random.randrange(j) if j > 0 else 0

    def _load(self, recovery_point: int, log_start_ckpt: int | None, clean: bool) -> None:
        self._remove_stray_files()
        self._open_segments(log_start_ckpt)
        if clean:
            recover_from = len(self._segments)
        else:
            recover_from = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
            log.info("%s: unclean shutdown, recovering from offset %d", self.tp, recovery_point)
        reindex_from = None
        if self._check_flushed_segments(recover_from):
            self._recover_segments_from(recover_from)
            if recover_from < len(self._segments):
                reindex_from = self._segments[recover_from].base_offset
        for i, seg in enumerate(self._segments[:-1]):
            seg.next_offset = max(seg.next_offset, self._segments[i + 1].base_offset)
        active = self._segments[-1]
        if not active.offset_index.writable:
            active.make_active(self.config)
        leo = self.log_end_offset
        if not clean:
            for seg in self._segments[recover_from:]:
                seg.flush()
            recovery_point = leo
        self.recovery_point = min(recovery_point, leo)
        self.log_start_offset = self._initial_log_start(log_start_ckpt, leo)
        self.local_log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._rebuild_producer_state(leo, reindex_from)

    def _remove_stray_files(self) -> None:
        """Files of interrupted operations, and indexes whose segment is gone; a cleaner
        swap a crash interrupted is completed or rolled back first (``cleaner.swap``)."""
        recover_interrupted_swap(self.dir)
        for path in self.dir.iterdir():
            if path.name.endswith((DELETED_SUFFIX, ".tmp")):
                path.unlink(missing_ok=True)
        bases = {offset_from_file_name(p) for p in self.dir.glob("*" + LOG_SUFFIX)}
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            for p in self.dir.glob("*" + suffix):
                if offset_from_file_name(p) not in bases:
                    p.unlink()

    def _open_segments(self, log_start_ckpt: int | None) -> None:
        """Every segment on disk, the last one active; an empty directory gets one segment
        at the checkpointed log start."""
        bases = sorted(offset_from_file_name(p) for p in self.dir.glob("*" + LOG_SUFFIX))
        now = self._clock()
        if not bases:
            start = log_start_ckpt if log_start_ckpt is not None else 0
            self._segments = [LogSegment(self.dir, start, self.config, now, active=True)]
        else:
            self._segments = [
                LogSegment(self.dir, b, self.config, now, active=(i == len(bases) - 1))
                for i, b in enumerate(bases)
            ]
        self._bases = [s.base_offset for s in self._segments]

    def _check_flushed_segments(self, count: int) -> bool:
        """Sanity-check the first ``count`` segments, which were flushed before the last
        shutdown; False once a corrupt one was truncated (nothing after it is kept, so there
        is nothing left to recover)."""
        for i, seg in enumerate(self._segments[:count]):
            try:
                seg.sanity_check()
                seg.load_tail()
            except (CorruptIndexError, RecordsError, ValueError) as exc:
                log.warning("%s: rebuilding indexes of %s: %s", self.tp, seg.log_path, exc)
                if seg.recover():
                    self._drop_segments_after(i)
                    return False
            if i < len(self._segments) - 1:
                seg.next_offset = self._segments[i + 1].base_offset
        return True

    def _recover_segments_from(self, first: int) -> None:
        """Rescan the segments written since the recovery point, rebuilding their indexes and
        the leader epochs their batches carry; a corrupt tail truncates the log there."""
        i = first
        while i < len(self._segments):
            seg = self._segments[i]
            epoch_latest = self.leader_epoch_cache.latest_epoch()

            def track_epoch(h: BatchHeader) -> None:
                nonlocal epoch_latest
                ple = h.partition_leader_epoch
                if ple >= 0 and (epoch_latest is None or ple > epoch_latest):
                    self.leader_epoch_cache.assign(ple, h.base_offset)
                    epoch_latest = ple

            if seg.recover(track_epoch):
                self._drop_segments_after(i)
                break
            i += 1

    def _initial_log_start(self, log_start_ckpt: int | None, leo: int) -> int:
        """The log start after loading. A tiered log with no checkpoint entry (lost, corrupt,
        or younger than its interval) starts at 0, as Kafka's remote logs do: the first local
        offset would claim that everything tiered is gone, and expiration would delete it.
        The copy task raises it to the earliest remote segment once the metadata is loaded."""
        first_base = self._segments[0].base_offset
        if self.remote_enabled:
            return min(log_start_ckpt if log_start_ckpt is not None else 0, leo)
        ckpt = log_start_ckpt if log_start_ckpt is not None else first_base
        return min(max(ckpt, first_base), leo)

    def _drop_segments_after(self, index: int) -> None:
        """A corrupt segment was truncated: nothing after it can be trusted."""
        for seg in self._segments[index + 1 :]:
            log.warning("%s: deleting %s after corruption", self.tp, seg.log_path)
            seg.close()
            for p in seg.files():
                p.unlink(missing_ok=True)
        del self._segments[index + 1 :]
        self._bases = [s.base_offset for s in self._segments]

    def _rebuild_producer_state(self, leo: int, reindex_from: int | None = None) -> None:
        """Producer state from the latest snapshot plus the batches after it. With
        ``reindex_from`` (an unclean recovery from that segment base) replay starts at or
        before it and rewrites the transaction indexes of the segments from there."""
        ps = self.producer_state
        limit = leo if reindex_from is None else reindex_from
        snap = ps.load_latest_snapshot(limit, keep_above=reindex_from is not None)
        start = snap if snap is not None else self.local_log_start_offset
        start = max(start, self.local_log_start_offset)
        if snap is None or snap < start:
            ps.clear(start)
        if reindex_from is not None:
            for seg in self._segments:
                if seg.base_offset >= reindex_from:
                    seg.txn_index.reset()
        if start < leo:
            for seg, h in self._iter_headers_from(start):
                done = ps.replay(h, self._marker_in(seg, h))
                if reindex_from is not None and seg.base_offset >= reindex_from:
                    _index_aborted(seg, done)
        ps.last_map_offset = leo

    def _iter_headers_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchHeader]]:
        idx = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[idx:]:
            start = seg.offset_index.lookup(offset).position if seg.base_offset <= offset else 0
            for h in seg.iter_batches(start):
                if h.last_offset >= offset:
                    yield seg, h

    @staticmethod
    def _marker_in(seg: LogSegment, h: BatchHeader) -> EndTxnMarker | None:
        if not h.is_control or h.producer_id < 0:
            return None
        return marker_of_batch(seg.read_batch(h), h._replace(position=0))

    # -- append --------------------------------------------------------------------------

    def append_as_leader(
        self,
        batches: bytes | bytearray | memoryview,
        leader_epoch: int,
        required_acks: int = 1,
        *,
        single_batch: bool = False,
        defer_flush: bool = False,
    ) -> AppendResult:
        """Validate, assign offsets and write ``batches`` atomically (all or nothing).

        ``required_acks`` is accepted for the contract; with one replica every append is
        fully acknowledged once written. ``single_batch``: a client's Produce (v3 and later)
        carries exactly one batch per partition, as Kafka enforces. Sequence checks rely on
        it: every batch of a request is checked against the producer state from before the
        request, which is only right with one batch per producer (with two, a valid pair
        would be refused and a repeated one appended twice).
        ``defer_flush``: an append that reaches ``flush.messages`` does not fsync here (under
        the lock, on the caller's thread) but returns ``flush_offset`` for the caller to
        flush with ``flush_to``; otherwise it fsyncs before returning.
        """
        del required_acks
        view = memoryview(batches)
        cfg = self.config
        headers = self._client_batches(view, single_batch)
        if not headers:
            with self._lock:
                return AppendResult(-1, -1, -1, self.log_start_offset)
        total = headers[-1].end
        with self._lock:
            now = self._clock()
            append_time = now if cfg.log_append_time else -1
            if not cfg.log_append_time:
                self._check_timestamps(headers, now)
            duplicate = self._check_producers(headers)
            if isinstance(duplicate, AppendResult):
                return duplicate
            staged = duplicate
            base_offset = self.log_end_offset
            out = _stamp_batches(view, headers, base_offset, leader_epoch, append_time, staged)
            written_at = self._write_locked(out, total, now)
            if leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, base_offset, durable=False)
            self.producer_state.commit(staged, out.next_offset)
            flush_offset = self._count_unflushed_locked(
                out.records, base_offset, out.next_offset, written_at, defer_flush
            )
            return AppendResult(
                base_offset,
                out.next_offset - 1,
                append_time,
                self.log_start_offset,
                records_count=out.records,
                size=total,
                flush_offset=flush_offset,
            )

    def active_producers(self) -> list[ProducerEntry]:
        """A copy of every producer's state here (DescribeProducers)."""
        with self._lock:
            return [e.clone() for e in self.producer_state.producers.values()]

    def has_ongoing_txn(self, producer_id: int) -> bool:
        """The producer has a transaction open here (KIP-890: no verification needed)."""
        with self._lock:
            return self.producer_state.has_ongoing_txn(producer_id)

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        committed: bool,
        leader_epoch: int,
        defer_flush: bool = False,
        strict_epoch: bool = False,
    ) -> AppendResult:
        """Append the COMMIT or ABORT marker of WriteTxnMarkers (Kafka's origin COORDINATOR).

        Refused with INVALID_PRODUCER_EPOCH below the producer's epoch and
        TRANSACTION_COORDINATOR_FENCED below the coordinator epoch last seen; nothing is
        appended then. The transaction it ends, if one is open, leaves the ongoing set; an
        aborted one is indexed in the ``.txnindex`` of the segment the marker lands in.
        ``defer_flush`` as ``append_as_leader``; ``strict_epoch`` as
        ``ProducerStateManager.check_marker``.
        """
        kind = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
        with self._lock:
            ps = self.producer_state
            try:
                ps.check_marker(
                    producer_id, producer_epoch, coordinator_epoch, strict_epoch=strict_epoch
                )
            except ProducerStateError as exc:
                raise LogAppendError(exc.code, str(exc)) from exc
            now = self._clock()
            base_offset = self.log_end_offset
            batch = build_marker_batch(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                marker=EndTxnMarker(kind, coordinator_epoch),
                base_offset=base_offset,
                timestamp_ms=now,
                partition_leader_epoch=leader_epoch,
            )
            out = _StampedBatches(
                [batch], [BatchInfo(len(batch), base_offset, now)], 1, now, base_offset + 1
            )
            written_at = self._write_locked(out, len(batch), now)
            if leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, base_offset, durable=False)
            completed = ps.complete_txn(
                producer_id,
                producer_epoch,
                coordinator_epoch,
                committed=committed,
                marker_offset=base_offset,
                timestamp=now,
            )
            _index_aborted(self.active_segment, completed)
            ps.first_unstable_offset(self.high_watermark)  # forgets what is replicated
            flush_offset = self._count_unflushed_locked(
                1, base_offset, out.next_offset, written_at, defer_flush
            )
            return AppendResult(
                base_offset,
                base_offset,
                -1,
                self.log_start_offset,
                records_count=1,
                size=len(batch),
                flush_offset=flush_offset,
            )

    def _client_batches(self, view: memoryview, single_batch: bool) -> list[BatchHeader]:
        """The batch headers of a client's record set, refused with Kafka's error code when
        any batch is malformed or too large."""
        cfg = self.config
        try:
            headers = scan_batches(view)
            for h in headers:
                validate_client_batch(h)
            if cfg.compacted:
                require_keys(view, headers, str(self.tp))
        except RecordsError as exc:
            raise LogAppendError(exc.code, exc.message) from exc
        if single_batch and len(headers) > 1:
            raise LogAppendError(
                ErrorCode.INVALID_RECORD,
                f"a produce request must carry exactly one record batch per partition, "
                f"got {len(headers)}",
            )
        for h in headers:
            if h.size > cfg.max_message_bytes:
                raise LogAppendError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"batch of {h.size} bytes exceeds max.message.bytes {cfg.max_message_bytes}",
                )
        if headers and headers[-1].end > cfg.segment_bytes:
            raise LogAppendError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"{headers[-1].end} bytes exceed segment.bytes {cfg.segment_bytes}",
            )
        return headers

    def _write_locked(self, out: _StampedBatches, total: int, now: int) -> tuple[int, int]:
        """Roll if the batches do not belong in the active segment, then write them with one
        call; returns where they start (segment base offset, position)."""
        active = self.active_segment
        if active.should_roll(
            self.config, total, out.max_timestamp, out.next_offset - 1, now, self._jitter_ms
        ):
            try:
                active = self._roll_locked()
            except OSError as exc:  # e.g. EMFILE/ENOSPC: nothing appended, next try rolls
                raise KafkaStorageError(f"{self.tp}: segment roll failed: {exc}") from exc
        written_at = (active.base_offset, active.size)
        try:
            active.append(out.buffers, out.infos)
        except OSError as exc:
            raise KafkaStorageError(f"{self.tp}: append failed: {exc}") from exc
        return written_at

    def _count_unflushed_locked(
        self,
        records: int,
        base_offset: int,
        next_offset: int,
        written_at: tuple[int, int],
        defer_flush: bool,
    ) -> int | None:
        """Apply ``flush.messages``: fsync now, or (deferred) record the flush owed and return
        the offset it must reach."""
        self._unflushed_messages += records
        if self._unflushed_messages < self.config.flush_messages:
            return None
        if not defer_flush:
            self._flush_locked()
            return None
        self._unflushed_messages = 0
        self._flushes_owed.append(_FlushOwed(base_offset, next_offset, *written_at))
        if self._hw_cap is None:
            self._hw_cap = self._flushes_owed[0]
        return next_offset

    def _check_timestamps(self, headers: list[BatchHeader], now: int) -> None:
        """CreateTime bounds, on the batch's base and max timestamps (no record decoding)."""
        before = self.config.message_timestamp_before_max_ms
        after = self.config.message_timestamp_after_max_ms
        for h in headers:
            if h.base_timestamp >= 0 and now - h.base_timestamp > before:
                raise LogAppendError(
                    ErrorCode.INVALID_TIMESTAMP,
                    f"timestamp {h.base_timestamp} is more than {before} ms before now",
                )
            if h.max_timestamp - now > after:
                raise LogAppendError(
                    ErrorCode.INVALID_TIMESTAMP,
                    f"timestamp {h.max_timestamp} is more than {after} ms after now",
                )

    def _check_producers(
        self, headers: list[BatchHeader]
    ) -> AppendResult | dict[int, ProducerEntry]:
        staged: dict[int, ProducerEntry] = {}
        ps = self.producer_state
        for h in headers:
            if h.producer_id < 0:
                continue
            dup = ps.find_duplicate(h)
            if dup is not None:
                log_append = self.config.log_append_time
                return AppendResult(
                    dup.first_offset,
                    dup.last_offset,
                    dup.timestamp if log_append else -1,
                    self.log_start_offset,
                    duplicate=True,
                )
            try:
                ps.check_and_stage(h, staged)
            except ProducerStateError as exc:
                raise LogAppendError(exc.code, str(exc)) from exc
        return staged

    # -- replication (cluster mode) -------------------------------------------------------

    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> AppendResult:
        """Append the leader's batches as they are: offsets and leader epochs kept, CRCs
        checked, each new epoch recorded in the epoch cache, producer state updated.

        The first batch must start at or after the LEO (Kafka's follower append allows gaps,
        as compaction leaves them) and offsets must increase."""
        view = memoryview(batches)
        try:
            headers = scan_batches(view, verify_crc=True)
        except RecordsError as exc:
            raise LogAppendError(exc.code, exc.message) from exc
        if not headers:
            with self._lock:
                return AppendResult(-1, -1, -1, self.log_start_offset)
        total = headers[-1].end
        with self._lock:
            expected = self.log_end_offset
            for h in headers:
                if h.base_offset < expected:
                    raise LogAppendError(
                        ErrorCode.CORRUPT_MESSAGE,
                        f"{self.tp}: follower batch at {h.base_offset} below offset {expected}",
                    )
                expected = h.next_offset
            now = self._clock()
            out = _StampedBatches(
                [view[:total]],
                [BatchInfo(h.size, h.last_offset, h.max_timestamp) for h in headers],
                sum(h.records_count for h in headers),
                max(h.max_timestamp for h in headers),
                headers[-1].next_offset,
            )
            written_at = self._write_locked(out, total, now)
            cache = self.leader_epoch_cache
            active = self.active_segment
            for h in headers:
                latest = cache.latest_epoch()
                epoch = h.partition_leader_epoch
                if epoch >= 0 and (latest is None or epoch > latest):
                    cache.assign(epoch, h.base_offset, durable=False)
                marker = marker_of_batch(view, h) if h.is_control else None
                _index_aborted(active, self.producer_state.replay(h, marker))
            self.producer_state.first_unstable_offset(self.high_watermark)
            self.producer_state.last_map_offset = out.next_offset
            self._count_unflushed_locked(
                out.records, headers[0].base_offset, out.next_offset, written_at, False
            )
            return AppendResult(
                headers[0].base_offset,
                out.next_offset - 1,
                -1,
                self.log_start_offset,
                records_count=out.records,
                size=total,
            )

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or above ``offset`` (a follower's divergence point):
        segments, index entries, epoch-cache entries and producer state (rebuilt) follow.
        A batch holding ``offset`` goes whole, as in Kafka. Below the local log start the
        log restarts empty at ``offset``. Returns False when no record was removed.

        The epoch cache is truncated at the LEO even then: a broker that led an epoch and
        appended nothing in it holds an entry starting at its LEO that the new leader never
        saw. Kept, it is the ``last_fetched_epoch`` of every Fetch, and the leader answers
        each one with the same diverging epoch (Kafka's ``UnifiedLog.truncateTo`` does
        the same)."""
        with self._lock:
            if offset >= self.log_end_offset:
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                return False
            log.info("%s: truncating from %d to %d", self.tp, self.log_end_offset, offset)
            if offset <= self._segments[0].base_offset:
                self._restart_at_locked(max(offset, 0))
            else:
                idx = bisect.bisect_right(self._bases, offset) - 1
                for seg in self._segments[idx + 1 :]:
                    self._remove_segment(seg, "truncation")
                seg = self._segments[idx]
                first = seg.translate_offset(offset, seg.size)
                if first is not None:
                    seg.truncate_at(first.position)
                    seg.txn_index.truncate_to(first.base_offset)
                if not seg.offset_index.writable:
                    seg.make_active(self.config)
            leo = self.log_end_offset
            self.leader_epoch_cache.truncate_from_end(leo)
            self.producer_state.delete_snapshots_above(leo)
            self._rebuild_producer_state(leo)
            self.recovery_point = min(self.recovery_point, leo)
            self._flushes_owed = deque(f for f in self._flushes_owed if f.first_offset < leo)
            self._hw_cap = self._flushes_owed[0] if self._flushes_owed else None
            if self._replicated_hw is not None:
                self._replicated_hw = min(self._replicated_hw, leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and restart it empty at ``offset``, which becomes the log
        start (a follower whose LEO is below the leader's log start, F-11)."""
        with self._lock:
            log.info("%s: restarting the log at %d", self.tp, offset)
            self._restart_at_locked(offset)
            self.log_start_offset = offset
            self.leader_epoch_cache.clear()
            self.producer_state.delete_snapshots_above(-1)
            self.producer_state.clear(offset)
            self.recovery_point = offset
            self._flushes_owed.clear()
            self._hw_cap = None
            if self._replicated_hw is not None:
                self._replicated_hw = offset

    def restart_from_remote(
        self,
        offset: int,
        log_start_offset: int,
        epochs: Sequence[tuple[int, int]],
        producer_snapshot: bytes,
    ) -> None:
        """A follower's bootstrap from the remote tier (KIP-405): the log restarts empty at
        ``offset`` (the local log start) with ``log_start_offset`` below it (the rest is
        remote), the leader-epoch cache holds ``epochs`` (those starting before ``offset``)
        and the producer state is the snapshot taken at ``offset``."""
        with self._lock:
            log.info(
                "%s: restarting the log at %d from the remote tier (log start %d)",
                self.tp,
                offset,
                log_start_offset,
            )
            self.truncate_fully_and_start_at(offset)
            self.log_start_offset = min(log_start_offset, offset)
            for epoch, start in epochs:
                if start < offset:
                    self.leader_epoch_cache.assign(epoch, start, durable=False)
            self.leader_epoch_cache.sync()
            atomic_write(self.producer_state.snapshot_path(offset), producer_snapshot)
            self.producer_state.load_latest_snapshot(offset)
            self.producer_state.last_map_offset = offset

    def _restart_at_locked(self, offset: int) -> None:
        for seg in list(self._segments):
            self._remove_segment(seg, "truncation")
        seg = LogSegment(self.dir, offset, self.config, self._clock(), active=True)
        self._segments = [seg]
        self._bases = [offset]
        self.log_start_offset = min(self.log_start_offset, offset)
        self.local_log_start_offset = offset
        self.leader_epoch_cache.truncate_from_end(offset)

    def set_high_watermark(self, offset: int) -> int:
        """Set the HW the replication layer computed (leader: min LEO over the ISR;
        follower: the leader's), clamped into ``[log_start_offset, LEO]``; returns it.
        From the first call on, reads stop there instead of at the LEO."""
        with self._lock:
            hw = max(self.log_start_offset, min(offset, self.log_end_offset))
            self._replicated_hw = hw
            return hw

    # -- roll / flush ----------------------------------------------------------------------

    def roll(self) -> LogSegment:
        with self._lock:
            return self._roll_locked()

    def _roll_locked(self) -> LogSegment:
        new_base = self.log_end_offset
        active = self.active_segment
        if active.base_offset == new_base and active.size == 0:
            return active
        active.on_become_inactive()
        # As Kafka (flushUptoOffsetExclusive on its scheduler), the sealed segment and the
        # producer snapshot are made durable later by ``flush_sealed`` on a background
        # thread: an fsync per roll on the caller (the event loop) would stall every connection.
        # The recovery point moves only after that flush, so an unclean restart re-validates
        # whatever was not yet durable.
        self.producer_state.last_map_offset = new_base
        self.producer_state.take_snapshot(durable=False)
        seg = LogSegment(self.dir, new_base, self.config, self._clock(), active=True)
        self._segments.append(seg)
        self._bases.append(new_base)
        self._jitter_ms = self._new_jitter()
        return seg

    def flush_sealed(self) -> None:
        """Make every sealed segment above the recovery point durable, then advance it.

        Runs on a background thread; appends continue meanwhile (they only touch the active
        segment). A segment deleted by retention while being flushed no longer needs it.
        """
        with self._lock:
            target = self.active_segment.base_offset
            if target <= self.recovery_point:
                return
            pending = [
                seg
                for seg, nxt in zip(self._segments, self._bases[1:], strict=False)
                if nxt > self.recovery_point
            ]
            snapshot = self.producer_state.snapshot_path(target)
        for seg in pending:
            try:
                seg.flush()
            except (OSError, ValueError):  # closed by a concurrent delete
                continue
        try:
            fd = os.open(snapshot, os.O_RDONLY)
        except FileNotFoundError:
            fd = -1
        if fd >= 0:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        try:
            self.leader_epoch_cache.sync()
            fsync_dir(self.dir)
        except FileNotFoundError:  # the partition was deleted meanwhile
            return
        with self._lock:
            self.recovery_point = max(self.recovery_point, target)
            self._release_flushed_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def flush_to(self, offset: int) -> None:
        """Make everything below ``offset`` durable, then advance the recovery point to it.

        Runs on a flush worker thread, never on the event loop. The partition lock is held
        only to pick the segments and to sync their indexes (a roll remaps an index under
        it); the data fsyncs run without it, so appends and reads go on meanwhile. Flushes of
        one partition run one at a time, and one that finds its offset already durable
        returns at once: concurrent callers share one fsync. If the fsync fails, the next
        append asks for a flush again.
        """
        with self._flush_lock:
            with self._lock:
                if offset <= self.recovery_point or self.closed:
                    return
                pending = [
                    seg
                    for seg, nxt in zip(self._segments, [*self._bases[1:], None], strict=True)
                    if nxt is None or nxt > self.recovery_point
                ]
            try:
                for seg in pending:
                    os.fsync(seg.fd)
                with self._lock:
                    for seg in pending:
                        seg.offset_index.flush()
                        seg.time_index.flush()
                self.leader_epoch_cache.sync()
            except BaseException:
                with self._lock:
                    self._unflushed_messages = max(
                        self._unflushed_messages, self.config.flush_messages
                    )
                raise
            with self._lock:
                self.recovery_point = max(self.recovery_point, offset)
                self._last_flush_ms = self._clock()
                self._release_flushed_locked()

    def _flush_locked(self) -> None:
        for seg, nxt in zip(self._segments, [*self._bases[1:], None], strict=True):
            if nxt is None or nxt > self.recovery_point:
                seg.flush()
        self.leader_epoch_cache.sync()
        self.recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock()
        self._release_flushed_locked()

    def _release_flushed_locked(self) -> None:
        """Lift the HW cap of every deferred flush the recovery point has now passed."""
        owed = self._flushes_owed
        while owed and owed[0].flush_offset <= self.recovery_point:
            owed.popleft()
        self._hw_cap = owed[0] if owed else None

    # -- read ------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        min_one_message: bool = True,
        upper_bound: Literal["hw", "lso", "leo"] = "hw",
        *,
        zero_copy: bool = False,
    ) -> FetchData:
        """Whole batches from the one holding ``offset``, within ``max_bytes``.

        ``min_one_message`` returns the first batch even when it alone exceeds ``max_bytes``
        (Kafka's rule that keeps a consumer from stalling on a large batch). ``"leo"`` reads
        up to the log end (a follower's fetch); ``"hw"`` stops at the high watermark and
        ``"lso"`` at the last stable offset (read_committed), which is always a batch
        boundary since a transaction starts at a batch's base offset. ``zero_copy`` returns
        the range of the segment file instead of its bytes (a ``FileSlice``, for a Fetch
        response sent with ``sendfile``).
        """
        with self._lock:
            segments = list(self._segments)
            bases = list(self._bases)
            leo = self.log_end_offset
            end = (segments[-1].base_offset, self.active_segment.size)
            readable_end = leo
            if upper_bound != "leo":
                if self._hw_cap is not None:
                    end = (self._hw_cap.segment_base, self._hw_cap.position)
                readable_end = self.high_watermark
                if upper_bound == "lso":
                    lso = self.last_stable_offset
                    if lso < readable_end:
                        readable_end = lso
                        end = min(end, _position_of(segments, bases, lso))
            local_start = self.local_log_start_offset
            log_start = self.log_start_offset
            replicated_end = self._replicated_hw is not None and readable_end < leo
        if offset < local_start or offset > leo or offset < log_start:
            raise OffsetOutOfRange(offset, log_start, local_start, leo)
        if offset >= readable_end:
            return FetchData([], 0)
        if replicated_end:
            end = min(end, _position_of(segments, bases, readable_end))
        idx = max(0, bisect.bisect_right(bases, offset) - 1)
        for i in range(idx, len(segments)):
            seg = segments[i]
            if seg.base_offset > end[0]:
                break
            max_position = end[1] if seg.base_offset == end[0] else seg.size
            got = (seg.slice if zero_copy else seg.read)(
                offset, max_bytes, max_position, min_one_message
            )
            if got is not None:
                first, data = got
                if not data:
                    return FetchData([], 0, first.base_offset)
                return FetchData([data], len(data), first.base_offset)
        return FetchData([], 0)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound: int, *, from_start: bool = False
    ) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` from the
        transaction indexes of the segment holding ``fetch_offset`` and the later ones
        (``from_start``: of every local segment, for a read that began in remote storage),
        and whether the search is complete (Kafka's ``collectAbortedTransactions``)."""
        with self._lock:
            segments = list(self._segments)
            bases = list(self._bases)
        first = 0 if from_start else max(0, bisect.bisect_right(bases, fetch_offset) - 1)
        out: list[AbortedTxn] = []
        for seg in segments[first:]:
            if collect_aborted(seg.txn_index.entries, fetch_offset, upper_bound, out):
                return out, True
        return out, False

    def aborted_txns_in(self, fetch_offset: int, data: FetchData) -> list[AbortedTxn]:
        """The aborted transactions a read_committed consumer needs to filter ``data``, read
        from ``fetch_offset``: those overlapping it up to its last batch's end."""
        upper = None
        for chunk in data.chunks:
            if isinstance(chunk, FileSlice):
                upper = chunk.next_offset if chunk.size else upper
            else:
                upper = next_offset_after(chunk) or upper
        if upper is None:
            return []
        return self.collect_aborted_txns(fetch_offset, upper)[0]

    def is_remote_offset(self, offset: int) -> bool:
        """True if ``offset`` is visible to clients but no longer held locally
        (``log_start_offset <= offset < local_log_start_offset``): only remote storage has it."""
        with self._lock:
            return self.log_start_offset <= offset < self.local_log_start_offset

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int, int | None] | None:
        """First local record with timestamp >= ``timestamp_ms``: (offset, ts, leader epoch)."""
        with self._lock:
            segments = list(self._segments)
            start = self.local_log_start_offset
        for seg in segments:
            if seg.largest_timestamp >= timestamp_ms and seg.size > 0:
                found = seg.find_offset_by_timestamp(timestamp_ms, start)
                if found is not None:
                    off, ts, epoch = found
                    return off, ts, epoch if epoch >= 0 else None
        return None

    def offset_for_max_timestamp(self) -> tuple[int, int, int | None] | None:
        """ListOffsets MAX_TIMESTAMP (-3): the first batch with the largest local timestamp."""
        with self._lock:
            segments = list(self._segments)
        best: LogSegment | None = None
        for seg in segments:
            if seg.size > 0 and (
                best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far
            ):
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        h = best.batch_at_max_timestamp()
        if h is None:
            return None
        epoch = h.partition_leader_epoch
        found = best.find_offset_by_timestamp(h.max_timestamp, h.base_offset)
        offset = found[0] if found is not None else h.last_offset
        return offset, h.max_timestamp, epoch if epoch >= 0 else None

    # -- log start offset ------------------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (<= HW); returns it."""
        with self._lock:
            if offset > self.high_watermark or offset < 0:
                raise OffsetOutOfRange(
                    offset, self.log_start_offset, self.local_log_start_offset, self.log_end_offset
                )
            self._maybe_increment_log_start_offset(offset)
            return self.log_start_offset

    def update_log_start_offset_from_remote(self, offset: int) -> None:
        with self._lock:
            if not self.remote_enabled:
                log.warning("%s: ignoring remote log start offset on a local log", self.tp)
                return
            self._maybe_increment_log_start_offset(offset)

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        with self._lock:
            if not self.remote_enabled:
                log.warning("%s: ignoring highest remote offset on a local log", self.tp)
                return
            self.highest_offset_in_remote_storage = max(
                self.highest_offset_in_remote_storage, offset
            )

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.local_log_start_offset = max(self.local_log_start_offset, offset)
        self.leader_epoch_cache.truncate_from_start(offset, durable=False)
        self.producer_state.truncate_head(offset)
        self.producer_state.last_map_offset = self.log_end_offset

    # -- retention ---------------------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """One retention pass (spec §1.8); returns the number of segments deleted."""
        now = self._clock() if now_ms is None else now_ms
        with self._lock:
            if self.closed:  # deleted or shut down while a sliced pass was under way
                return 0
            self._remove_due_deletes(now)
            self.producer_state.remove_expired(now, self.config.producer_id_expiration_ms)
            if now - self._last_flush_ms >= self.config.flush_ms:
                self._flush_locked()
            if not self.config.delete_enabled:
                return 0
            deleted = self._delete_log_start_breached()
            deleted += self._delete_size_breached()
            deleted += self._delete_time_breached(now)
            return deleted

    def _delete_time_breached(self, now: int) -> int:
        retention = self.config.effective_local_retention_ms(self.remote_copy_enabled)
        if retention < 0:
            return 0
        return self._delete_old_segments(
            lambda seg, _nxt: now - seg.largest_timestamp > retention, "retention.ms"
        )

    def _delete_size_breached(self) -> int:
        retention = self.config.effective_local_retention_bytes(self.remote_copy_enabled)
        size = self.size
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def breached(seg: LogSegment, _nxt: LogSegment | None) -> bool:
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return True
            return False

        return self._delete_old_segments(breached, "retention.bytes")

    def _delete_log_start_breached(self) -> int:
        def breached(seg: LogSegment, nxt: LogSegment | None) -> bool:
            limit = (
                self.local_log_start_offset if self.remote_copy_enabled else self.log_start_offset
            )
            return nxt is not None and nxt.base_offset <= limit

        return self._delete_old_segments(breached, "log start offset")

    def _delete_old_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str
    ) -> int:
        deletable: list[LogSegment] = []
        should_roll = False
        hw = self.high_watermark
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            hit = hw >= upper and predicate(seg, nxt)
            if hit and self.remote_enabled and nxt is None and seg.size > 0:
                should_roll = True
            last_and_empty = nxt is None and seg.size == 0
            if hit and not last_and_empty and self._eligible_for_deletion(nxt, upper):
                deletable.append(seg)
            else:
                break
        if should_roll:
            log.info("%s: rolling the active segment so that it can be tiered", self.tp)
            self._roll_locked()
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            new = self._roll_locked()
            if deletable[-1] is new:
                deletable.pop()
        for seg in deletable:
            self._remove_segment(seg, reason)
        first = self._segments[0].base_offset
        if self.remote_copy_enabled:
            self.local_log_start_offset = max(self.local_log_start_offset, first)
        else:
            self._maybe_increment_log_start_offset(first)
            self.local_log_start_offset = max(self.local_log_start_offset, first)
        return len(deletable)

    def _eligible_for_deletion(self, nxt: LogSegment | None, upper: int) -> bool:
        if not self.remote_copy_enabled:
            return True
        lso_passed = nxt is not None and self.log_start_offset >= nxt.base_offset
        return (upper > 0 and upper - 1 <= self.highest_offset_in_remote_storage) or lso_passed

    def _remove_segment(self, seg: LogSegment, reason: str) -> None:
        log.info("%s: deleting segment %d (%s)", self.tp, seg.base_offset, reason)
        self._segments.remove(seg)
        self._bases = [s.base_offset for s in self._segments]
        paths = seg.rename_to_deleted()
        self.producer_state.delete_snapshot(seg.base_offset)
        due = self._clock() + self.config.file_delete_delay_ms
        self._pending_deletes.append(_PendingDelete(due, seg, paths))
        if self.config.file_delete_delay_ms <= 0:
            self._remove_due_deletes(due)

    def _remove_due_deletes(self, now: int) -> None:
        keep = []
        for pending in self._pending_deletes:
            if pending.due_ms <= now:
                pending.segment.close()
                for p in pending.paths:
                    p.unlink(missing_ok=True)
            else:
                keep.append(pending)
        self._pending_deletes = keep

    # -- tiering hooks ---------------------------------------------------------------------

    def segments(self) -> list[SegmentInfo]:
        with self._lock:
            out = []
            last = len(self._segments) - 1
            for i, seg in enumerate(self._segments):
                nxt = self._segments[i + 1].base_offset if i < last else self.log_end_offset
                out.append(
                    SegmentInfo(
                        seg.base_offset,
                        nxt,
                        seg.size,
                        seg.largest_timestamp,
                        seg.log_path,
                        seg.index_path,
                        seg.time_index_path,
                        seg.txn_index_path,
                        i == last,
                    )
                )
            return out

    def producer_snapshot_for(self, next_base_offset: int) -> Path:
        """The producer-state snapshot taken when the segment ending there was sealed.

        Rebuilt from the nearest older snapshot if it was lost (e.g. after a crash).
        """
        with self._lock:
            path = self.producer_state.snapshot_path(next_base_offset)
            if path.exists():
                return path
            if next_base_offset > self.log_end_offset:
                raise ValueError(f"{next_base_offset} is beyond the log end offset")
            rebuilt = ProducerStateManager(self.dir)
            snap = rebuilt.load_latest_snapshot(self.log_end_offset)
            start = self.local_log_start_offset
            if snap is not None and snap <= next_base_offset:
                start = max(snap, start)
            else:
                rebuilt.clear(start)
            for seg, h in self._iter_headers_from(start):
                if h.base_offset >= next_base_offset:
                    break
                rebuilt.replay(h, self._marker_in(seg, h))
            rebuilt.last_map_offset = next_base_offset
            return rebuilt.take_snapshot()

    # -- log cleaner hooks -------------------------------------------------------------------

    def active_producer_last_offsets(self) -> dict[int, int]:
        """Each producer's last offset: the cleaner keeps that batch (empty if need be) so
        the producer's next sequence still follows."""
        with self._lock:
            return {pid: e.last_offset for pid, e in self.producer_state.producers.items()}

    def replace_segments(self, old: Sequence[SegmentInfo], new_base: int) -> bool:
        """Swap the cleaned segment ``new_base`` (its ``.cleaned`` files) in for ``old``.

        Kafka's ``replaceSegments`` with the file protocol of ``cleaner.swap``. False, and
        nothing renamed, if any old segment is no longer a sealed segment of this log (the
        log was closed, retention or deletion removed it). The old segments' files become
        ``.deleted`` but stay open until their delayed deletion, run by retention on the
        broker's loop, so reads in flight finish on them.
        """
        with self._lock:
            if self.closed:
                return False
            sealed = {s.base_offset: s for s in self._segments[:-1]}
            replaced: list[LogSegment] = []
            for info in old:
                seg = sealed.get(info.base_offset)
                if seg is None or seg.deleted or seg.size != info.size:
                    return False
                replaced.append(seg)
            cleaned_to_swap(self.dir, new_base)
            renamed: list[list[Path]] = []
            for seg in replaced:
                renamed.append([])
                for path in seg.files():
                    if path.exists():
                        target = path.with_name(path.name + DELETED_SUFFIX)
                        os.replace(path, target)
                        renamed[-1].append(target)
            swap_to_final(self.dir, new_base)
            # until the new segment is open the old ones keep serving from their open files;
            # on disk the swap is complete whatever happens next
            new = LogSegment(self.dir, new_base, self.config, self._clock(), active=False)
            new.load_tail()
            due = self._clock() + self.config.file_delete_delay_ms
            for seg, paths in zip(replaced, renamed, strict=True):
                self._segments.remove(seg)
                seg.deleted = True
                self._pending_deletes.append(_PendingDelete(due, seg, paths))
            at = bisect.bisect_left([s.base_offset for s in self._segments], new_base)
            self._segments.insert(at, new)
            self._bases = [s.base_offset for s in self._segments]
            new.next_offset = max(new.next_offset, self._segments[at + 1].base_offset)
            return True

    # -- lifecycle -----------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        """New settings apply from the next roll (index sizes) or the next pass (retention)."""
        with self._lock:
            self.config = config

    def close(self, clean: bool = True) -> None:
        """Flush and snapshot producer state (clean) and release every file."""
        with self._lock:
            self.closed = True
            if clean:
                self._flush_locked()
                self.producer_state.last_map_offset = self.log_end_offset
                self.producer_state.snapshot_at_shutdown()
                self.active_segment.offset_index.trim()
                self.active_segment.time_index.trim()
            for seg in self._segments:
                seg.close()
            self._remove_due_deletes(2**63 - 1)

    def delete_files(self) -> None:
        """Remove everything on disk (topic deletion); the log must not be used afterwards."""
        with self._lock:
            self.closed = True
            for seg in self._segments:
                seg.close()
            for pending in self._pending_deletes:
                pending.segment.close()
            self._segments = []
            for p in self.dir.iterdir():
                p.unlink(missing_ok=True)
            os.rmdir(self.dir)


def _index_aborted(seg: LogSegment, completed: CompletedTxn | None) -> None:
    """Record an aborted transaction in the index of the segment its marker is in."""
    if completed is not None and completed.aborted:
        seg.txn_index.append(
            AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.marker_offset,
                completed.last_stable_offset,
            )
        )


def _position_of(segments: list[LogSegment], bases: list[int], offset: int) -> tuple[int, int]:
    """(segment base, file position) where the batch holding ``offset`` starts: the read
    bound of a replicated high watermark (always a batch boundary)."""
    idx = max(0, bisect.bisect_right(bases, offset) - 1)
    seg = segments[idx]
    first = seg.translate_offset(offset, seg.size)
    return seg.base_offset, seg.size if first is None else first.position


@dataclass(slots=True)
class _StampedBatches:
    """A record set with its offsets and leader epoch patched in, as buffers to write."""

    buffers: list[bytes | bytearray | memoryview]
    infos: list[BatchInfo]
    records: int
    max_timestamp: int
    next_offset: int


def _stamp_batches(
    view: memoryview,
    headers: list[BatchHeader],
    base_offset: int,
    leader_epoch: int,
    append_time: int,
    staged: dict[int, ProducerEntry],
) -> _StampedBatches:
    """Patch each batch's header copy (base offset, leader epoch, LogAppendTime) and stage
    its producer's sequence; the record bytes are passed on as views, never copied."""
    out = _StampedBatches([], [], 0, -1, base_offset)
    for h in headers:
        hdr = bytearray(view[h.position : h.position + RECORDS_OFFSET])
        set_base_offset(hdr, 0, out.next_offset)
        set_partition_leader_epoch(hdr, 0, leader_epoch)
        last_offset = out.next_offset + h.last_offset_delta
        batch_ts = h.max_timestamp
        body = view[h.position + RECORDS_OFFSET : h.end]
        if append_time >= 0:
            batch_ts = append_time
            set_log_append_time_split(hdr, body, append_time)
        out.buffers.append(hdr)
        out.buffers.append(body)
        out.infos.append(BatchInfo(h.size, last_offset, batch_ts))
        if h.producer_id >= 0 and not h.is_control:
            ProducerStateManager.stage_batch(staged[h.producer_id], h, last_offset, batch_ts)
        out.records += h.records_count
        out.max_timestamp = max(out.max_timestamp, batch_ts)
        out.next_offset = last_offset + 1
    return out
