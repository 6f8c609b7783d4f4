"""Leader-epoch cache: which leader epoch started at which offset (Kafka's LeaderEpochFileCache).

Single-node tierlog is leader of everything, but replicas, truncation on leader change and
the tiered copy path (each remote segment records its epoch lineage) all read this cache, so
it follows Kafka's rules exactly, including its checkpoint file.
"""

from __future__ import annotations

import bisect
import os
import threading
from pathlib import Path
from typing import NamedTuple

from tierlog.fsutil import fsync_dir
from tierlog.log.checkpoint import read_epoch_checkpoint, write_epoch_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Entries are strictly increasing in both epoch and start offset.

    ``path`` None keeps the cache in memory only (used for copies handed to the tiering layer).
    """

    def __init__(self, path: Path | None, entries: list[EpochEntry] | None = None) -> None:
        self._path = path
        self._lock = threading.RLock()
        if entries is None and path is not None:
            entries = [EpochEntry(e, o) for e, o in read_epoch_checkpoint(path)]
        self._entries: list[EpochEntry] = list(entries or [])
        self._unsynced = False

    @property
    def path(self) -> Path | None:
        return self._path

    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    def latest_epoch(self) -> int | None:
        entry = self.latest_entry()
        return None if entry is None else entry.epoch

    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, durable: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True if the cache changed.

        Like Kafka, a new entry removes any entry with an epoch or start offset at or above it,
        so the list stays monotonic after a leader change with truncation.

        ``durable=False`` (the append path) writes the checkpoint without fsync and leaves
        the fsync to ``sync``, which the log calls before it advances its recovery point.
        An fsync per first append of 1,000 fresh partitions would stall the event loop for
        seconds; deferring it is safe because a crash before ``sync`` leaves the recovery
        point below the batches carrying the new epoch, and recovery re-assigns epochs from
        the batches it re-reads.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        with self._lock:
            latest = self._entries[-1] if self._entries else None
            if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
                return False
            self._entries = [
                e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
            ]
            self._entries.append(EpochEntry(epoch, start_offset))
            self._flush(durable)
            return True

    def epoch_for_offset(self, offset: int) -> int | None:
        with self._lock:
            previous: int | None = None
            for entry in self._entries:
                if entry.start_offset == offset:
                    return entry.epoch
                if entry.start_offset > offset:
                    return previous
                previous = entry.epoch
            return previous

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch answer: (largest epoch <= requested, end offset of that epoch)."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries and self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            epochs = [e.epoch for e in self._entries]
            higher = bisect.bisect_right(epochs, requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            higher_start = self._entries[higher].start_offset
            if higher == 0:
                return requested_epoch, higher_start
            return self._entries[higher - 1].epoch, higher_start

    def next_epoch(self, epoch: int) -> int | None:
        with self._lock:
            for entry in self._entries:
                if entry.epoch > epoch:
                    return entry.epoch
            return None

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (log truncated to it)."""
        with self._lock:
            if end_offset < 0 or not self._entries:
                return
            if self._entries[-1].start_offset < end_offset:
                return
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            self._flush()

    def truncate_from_start(self, start_offset: int, *, durable: bool = True) -> None:
        """Log start moved to ``start_offset``: the epoch covering it now starts there.

        ``durable=False`` (retention and DeleteRecords, on the event loop) skips the fsyncs
        as ``assign`` does; the next flush makes it durable, and a crash before that only
        brings back entries below the log start, which loading truncates again."""
        with self._lock:
            removed = [e for e in self._entries if e.start_offset <= start_offset]
            if not removed:
                return
            kept = [e for e in self._entries if e.start_offset > start_offset]
            self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
            self._flush(durable)

    def entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """Epochs covering ``[start_offset, end_offset)``, the first clipped to start there.

        This is the lineage a remote segment with those bounds records.
        """
        with self._lock:
            out: list[EpochEntry] = []
            for entry in self._entries:
                if entry.start_offset >= end_offset:
                    break
                if entry.start_offset <= start_offset:
                    out = [EpochEntry(entry.epoch, start_offset)]
                else:
                    out.append(entry)
            return out

    def copy(self) -> LeaderEpochCache:
        """An in-memory clone the caller may truncate freely."""
        with self._lock:
            return LeaderEpochCache(None, list(self._entries))

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._flush()

    @property
    def pending_sync(self) -> bool:
        """A deferred ``assign`` wrote the checkpoint and ``sync`` has not fsynced it yet."""
        with self._lock:
            return self._unsynced

    def sync(self) -> None:
        """fsync a checkpoint written by a deferred ``assign`` (a no-op when none is pending)."""
        with self._lock:
            if not self._unsynced or self._path is None:
                return
            self._unsynced = False
            path = self._path
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # the partition was deleted meanwhile
            return
        try:
            os.fsync(fd)
            fsync_dir(path.parent)
        except OSError:
            with self._lock:
                self._unsynced = True
            raise
        finally:
            os.close(fd)

    def _flush(self, durable: bool = True) -> None:
        if self._path is not None:
            entries = [(e.epoch, e.start_offset) for e in self._entries]
            write_epoch_checkpoint(self._path, entries, durable=durable)
            self._unsynced = not durable
