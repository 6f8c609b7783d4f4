"""Idempotent-producer state per partition and its ``<offset>.snapshot`` files.

Kafka's rules (ProducerStateManager / ProducerAppendInfo), reproduced because clients rely on
them for exactly-once delivery:

* The last five batches of each producer are remembered; a batch whose epoch and sequence
  range match one of them is a duplicate and is answered with the original offsets.
* A lower epoch than the producer's current one is fenced (INVALID_PRODUCER_EPOCH).
* In the same epoch the first sequence must follow the last one (wrapping at int32 max);
  a new epoch must start at sequence 0, and so must a producer whose batches a marker of a
  new epoch forgot; an unknown producer may start anywhere.

Transactions (KIP-98), as Kafka's ProducerAppendInfo:

* The first transactional batch of a producer opens its transaction at that batch's base
  offset (``current_txn_first_offset``); ``ongoing`` maps each producer with an open
  transaction to that offset, so the first unstable offset is its minimum.
* A non-transactional batch while the producer's transaction is open is INVALID_TXN_STATE.
* A marker (COMMIT/ABORT control batch) with an epoch below the producer's is
  INVALID_PRODUCER_EPOCH, with a coordinator epoch below the one last seen
  TRANSACTION_COORDINATOR_FENCED. It closes the open transaction (a ``CompletedTxn``; none
  when nothing was open), takes the marker's epochs, and forgets the cached batches when the
  epoch changed, so the next write starts at sequence 0.
* A completed transaction stays unstable until its marker is below the high watermark
  (``unreplicated``): a reader must not see the outcome before it is replicated.
* An aborted transaction is indexed with the LSO at that time: the first offset of the
  earliest transaction of another producer still open, else the marker's offset + 1.

Snapshots use Kafka's version-1 layout: version i16, CRC32C u32 over everything after the
CRC, then an int32-counted array of 46-byte entries (producer id i64, epoch i16, last sequence
i32, last offset i64, offset delta i32, timestamp i64, coordinator epoch i32, current
transaction first offset i64). Only the last batch per producer is stored, as in Kafka.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from tierlog.fsutil import atomic_write
from tierlog.log.names import SNAPSHOT_SUFFIX, offset_file_name, offset_from_file_name
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import NO_SEQUENCE, BatchHeader, increment_sequence
from tierlog.protocol.txn_markers import EndTxnMarker

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_VERSION = 1
_MAX_INT32 = 2**31 - 1
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed: ``last_stable_offset`` is what the ``.txnindex`` entry
    of an aborted one records."""

    producer_id: int
    first_offset: int
    marker_offset: int
    aborted: bool
    last_stable_offset: int


class ProducerStateError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for meta in self.batches:
            if meta.first_seq == first and meta.last_seq == last:
                return meta
        return None

    def clone(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_INT32)


class ProducerStateManager:
    """State of every idempotent producer writing to one partition."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.producers: dict[int, ProducerEntry] = {}
        self.last_map_offset = 0
        """Next offset whose batch is not yet reflected in ``producers``."""
        self.ongoing: dict[int, int] = {}
        """Producer id -> first offset of its open transaction."""
        self.unreplicated: list[CompletedTxn] = []
        """Completed transactions whose marker may still be at or above the high watermark,
        in marker order."""
        self._durable_snapshot: int | None = None
        """Offset of the snapshot last loaded, or last written with fsync: its file holds
        the state as of that offset (a snapshot describes the batches below its offset)."""

    # -- validation and update --------------------------------------------------------

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        entry = self.producers.get(header.producer_id)
        return None if entry is None else entry.find_duplicate(header)

    def check_and_stage(
        self, header: BatchHeader, staged: dict[int, ProducerEntry]
    ) -> ProducerEntry:
        """Validate one client batch against current (or already staged) state.

        Returns the entry to update; nothing is changed until ``commit`` so a rejected append
        leaves the state untouched.
        """
        pid = header.producer_id
        current = self.producers.get(pid)
        entry = staged.get(pid)
        if entry is None:
            entry = current.clone() if current is not None else ProducerEntry(pid, -1)
            staged[pid] = entry
        epoch = header.producer_epoch
        if epoch < entry.producer_epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {epoch} of producer {pid} is older than {entry.producer_epoch}",
            )
        first_seq = header.base_sequence
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != -1:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {epoch} of producer {pid} must start at sequence 0, "
                    f"got {first_seq}",
                )
        elif not _in_sequence(entry.last_seq, first_seq) and (
            entry.batches or entry.producer_epoch != -1
        ):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow "
                f"{entry.last_seq}",
            )
        if not header.is_transactional and entry.current_txn_first_offset >= 0:
            raise ProducerStateError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {pid} sent a non-transactional batch while its transaction "
                f"from offset {entry.current_txn_first_offset} is open",
            )
        return entry

    def has_ongoing_txn(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def check_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        strict_epoch: bool = False,
    ) -> None:
        """Refuse a marker from a fenced coordinator or for a stale producer epoch.

        ``strict_epoch`` (transaction version 2, whose every EndTxn bumps the epoch): the
        marker's epoch must exceed the producer's, except an equal one with no transaction
        open, which is a retry of a marker already written."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        stale = producer_epoch < entry.producer_epoch
        if strict_epoch and producer_epoch == entry.producer_epoch:
            stale = producer_id in self.ongoing
        if stale:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker epoch {producer_epoch} of producer {producer_id} is older than "
                f"{entry.producer_epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}",
            )

    def complete_txn(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        committed: bool,
        marker_offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """Apply a marker at ``marker_offset`` (validated, or replayed from the log): the
        producer's open transaction, if any, is completed."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, producer_epoch)
            self.producers[producer_id] = entry
        completed = None
        first = self.ongoing.pop(producer_id, None)
        if first is not None:
            completed = CompletedTxn(
                producer_id,
                first,
                marker_offset,
                not committed,
                self._index_lso(producer_id, marker_offset),
            )
            self.unreplicated.append(completed)
        if producer_epoch != entry.producer_epoch:
            entry.producer_epoch = producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp
        self.last_map_offset = marker_offset + 1
        return completed

    def _index_lso(self, producer_id: int, marker_offset: int) -> int:
        others = [first for pid, first in self.ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a read_committed consumer may not pass: the earliest open
        transaction, or a completed one whose marker is not yet below ``high_watermark``.
        Completed transactions below it are forgotten here (the log also calls it after each
        marker, so they never pile up on a partition nobody reads)."""
        unrep = self.unreplicated
        if not unrep and not self.ongoing:
            return None
        if unrep and unrep[0].marker_offset < high_watermark:
            self.unreplicated = unrep = [t for t in unrep if t.marker_offset >= high_watermark]
        firsts = [t.first_offset for t in unrep]
        if self.ongoing:
            firsts.append(min(self.ongoing.values()))
        return min(firsts) if firsts else None

    @staticmethod
    def stage_batch(entry: ProducerEntry, header: BatchHeader, last_offset: int, ts: int) -> None:
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = last_offset - header.last_offset_delta
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    increment_sequence(header.base_sequence, header.last_offset_delta),
                    last_offset,
                    header.last_offset_delta,
                    ts,
                )
            )
        entry.last_timestamp = ts

    def commit(self, staged: dict[int, ProducerEntry], next_offset: int) -> None:
        self.producers.update(staged)
        for pid, entry in staged.items():
            if entry.current_txn_first_offset >= 0:
                self.ongoing[pid] = entry.current_txn_first_offset
        self.last_map_offset = next_offset

    def replay(
        self, header: BatchHeader, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Rebuild state from a batch already in the log (recovery, a follower's append); no
        validation. ``marker`` is what a control batch carries; the transaction it completes
        is returned, for the caller to index."""
        pid = header.producer_id
        completed = None
        if pid >= 0 and not header.is_control:
            entry = self.producers.get(pid)
            if entry is None:
                entry = ProducerEntry(pid, header.producer_epoch)
                self.producers[pid] = entry
            self.stage_batch(entry, header, header.last_offset, header.max_timestamp)
            if entry.current_txn_first_offset >= 0:
                self.ongoing[pid] = entry.current_txn_first_offset
        elif pid >= 0 and marker is not None:
            completed = self.complete_txn(
                pid,
                header.producer_epoch,
                marker.coordinator_epoch,
                committed=marker.committed,
                marker_offset=header.base_offset,
                timestamp=header.max_timestamp,
            )
        self.last_map_offset = header.next_offset
        return completed

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start moved (retention, DeleteRecords). Producers are kept until they
        expire (producer.id.expiration.ms), as Kafka does since KAFKA-7190 / KIP-360:
        forgetting a producer whose batches were just deleted would let its retry of a
        batch whose response was lost be appended a second time."""
        self.last_map_offset = max(self.last_map_offset, log_start_offset)

    def clear(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated = []
        self.last_map_offset = offset
        self._durable_snapshot = None

    def _set_producers(self, entries: Iterable[ProducerEntry]) -> None:
        self.producers = {e.producer_id: e for e in entries}
        self.ongoing = {
            e.producer_id: e.current_txn_first_offset
            for e in self.producers.values()
            if e.current_txn_first_offset >= 0
        }
        self.unreplicated = []

    # -- snapshots ----------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        return self.log_dir / offset_file_name(offset, SNAPSHOT_SUFFIX)

    def take_snapshot(self, *, durable: bool = True) -> Path:
        """Write the state as of ``last_map_offset`` (done at roll and shutdown).

        At roll the write is not fsynced (``durable=False``); the log's background flush
        makes it durable. A snapshot torn by a crash fails its CRC on load and is skipped,
        and the producer state is rebuilt from the segments instead.
        """
        path = self.snapshot_path(self.last_map_offset)
        atomic_write(path, encode_snapshot(self.producers.values()), durable=durable)
        if durable:
            self._durable_snapshot = self.last_map_offset
        elif self._durable_snapshot == self.last_map_offset:
            self._durable_snapshot = None
        return path

    def snapshot_at_shutdown(self) -> None:
        """Make the state as of ``last_map_offset`` durable, unless it already is, as
        Kafka's ``takeSnapshot`` skips an offset it has a snapshot for: a partition nothing
        was written to since the broker started (the internal topics' dozens of empty
        partitions, most of all) would otherwise cost two fsyncs each at every shutdown.
        An empty log with no producer needs no snapshot: recovery has nothing to rebuild."""
        offset = self.last_map_offset
        if offset == 0 and not self.producers:
            return
        if self._durable_snapshot == offset and self.snapshot_path(offset).exists():
            return
        self.take_snapshot()

    def snapshot_offsets(self) -> list[int]:
        return sorted(offset_from_file_name(p) for p in self.log_dir.glob("*" + SNAPSHOT_SUFFIX))

    def load_latest_snapshot(self, max_offset: int, *, keep_above: bool = False) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset``; returns its offset.

        Snapshots above ``max_offset`` describe data the log no longer has and are deleted
        (kept with ``keep_above``: recovery replays from an older one over data still there);
        corrupt ones are deleted too and the next older one is tried.
        """
        for offset in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(offset)
            if offset > max_offset:
                if not keep_above:
                    path.unlink(missing_ok=True)
                continue
            try:
                entries = decode_snapshot(path.read_bytes())
            except (ValueError, struct.error) as exc:
                log.warning("deleting corrupt producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            self._set_producers(entries)
            self.last_map_offset = offset
            self._durable_snapshot = offset
            return offset
        self._set_producers(())
        return None

    def delete_snapshots_below(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off < offset:
                self.snapshot_path(off).unlink(missing_ok=True)

    def delete_snapshot(self, offset: int) -> None:
        self.snapshot_path(offset).unlink(missing_ok=True)

    def delete_snapshots_above(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off > offset:
                self.snapshot_path(off).unlink(missing_ok=True)


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    items = sorted(entries, key=lambda e: e.producer_id)
    body = bytearray(_COUNT.pack(len(items)))
    for e in items:
        last = e.batches[-1] if e.batches else None
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            last.timestamp if last else e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
    return _HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    version, crc = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"unknown snapshot version {version}")
    body = memoryview(data)[_HEAD.size :]
    if crc32c.crc32c(body) != crc:
        raise ValueError("snapshot CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise ValueError(f"snapshot length {len(body)} does not hold {count} entries")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = _ENTRY.unpack_from(
            body, _COUNT.size + i * _ENTRY.size
        )
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coord)
        entry.current_txn_first_offset = txn_first
        entry.last_timestamp = ts
        if last_offset >= 0:
            first_seq = (
                last_seq - delta if last_seq >= delta else _MAX_INT32 - (delta - last_seq) + 1
            )
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, delta, ts))
        out.append(entry)
    return out
