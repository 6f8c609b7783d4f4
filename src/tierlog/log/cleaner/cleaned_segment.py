"""The ``.cleaned`` files of one output segment, written before any swap.

A cleaned segment is ``<base>.log.cleaned`` plus its ``.index.cleaned`` and
``.timeindex.cleaned`` (and ``.txnindex.cleaned`` for the aborted transactions whose markers
it keeps), where ``<base>`` is the first source segment's base offset (Kafka's
names). Index entries follow the same rule as appends (``LogSegment``): an entry once more
than ``index.interval.bytes`` were written since the previous one, pointing at the batch's
position under its last offset; sealing writes the last time-index entry and trims both.
Everything is fsynced before the caller renames the files to ``.swap``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tierlog.log.index import OffsetIndex, TimeIndex
from tierlog.log.names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)
from tierlog.log.txn_index import AbortedTxn
from tierlog.protocol.records import BatchHeader


def cleaned_paths(directory: Path, base_offset: int) -> list[Path]:
    """The files a cleaned segment is written to, the log first."""
    return [
        directory / (offset_file_name(base_offset, suffix) + CLEANED_SUFFIX)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
    ]


class CleanedSegmentWriter:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
    ) -> None:
        self.base_offset = base_offset
        self.paths = cleaned_paths(directory, base_offset)
        for p in self.paths:
            p.unlink(missing_ok=True)
        log_path, index_path, time_path, self._txn_path = self.paths
        self._fd = os.open(log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self._index = OffsetIndex(index_path, base_offset, max_index_size, True)
        self._time_index = TimeIndex(time_path, base_offset, max_index_size, True)
        self._interval = index_interval_bytes
        self._since_entry = 0
        self.size = 0
        self.batches = 0
        self.max_timestamp = -1
        self._offset_of_max = base_offset
        self._closed = False

    def append(self, data: bytes, header: BatchHeader) -> None:
        """Write one whole batch (already filtered) at the end."""
        view = memoryview(data)
        pos = self.size
        while view:
            n = os.pwrite(self._fd, view, pos)
            view = view[n:]
            pos += n
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self._offset_of_max = header.last_offset
        if self._since_entry > self._interval:
            if not self._index.is_full():
                self._index.append(header.last_offset, self.size)
            if not self._time_index.is_full():
                self._time_index.maybe_append(self.max_timestamp, self._offset_of_max)
            self._since_entry = 0
        self._since_entry += len(data)
        self.size += len(data)
        self.batches += 1

    def write_txn_index(self, aborted: list[AbortedTxn]) -> None:
        """The cleaned segment's ``.txnindex`` (none when ``aborted`` is empty)."""
        if aborted:
            self._txn_path.write_bytes(b"".join(t.encode() for t in aborted))

    def finish(self, mtime_s: float | None) -> None:
        """Seal and fsync everything; ``mtime_s`` carries the source segments' last
        modification time over (it stands in for a timestamp where batches have none)."""
        self._time_index.maybe_append(self.max_timestamp, self._offset_of_max, skip_full_check=True)
        self._index.trim()
        self._time_index.trim()
        os.fsync(self._fd)
        self._close()
        for p in self.paths[1:]:
            if p == self._txn_path and not p.exists():
                continue
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if mtime_s is not None:
            os.utime(self.paths[0], (mtime_s, mtime_s))

    def abandon(self) -> None:
        """Close and delete the partial output (an aborted or failed cleaning)."""
        self._close()
        for p in self.paths:
            p.unlink(missing_ok=True)

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._index.close()
        self._time_index.close()
        os.close(self._fd)
