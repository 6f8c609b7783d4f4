"""One log segment: a ``.log`` file of whole v2 batches plus its offset and time indexes.

A segment never interprets records. Appends are one ``pwritev`` of already-validated batches;
reads are one ``pread`` of a byte range found through the offset index (and the headers of
the batches between the index entry and the offset) and cut at a batch boundary, or, for a
Fetch sent with ``sendfile``, that range without its bytes (``slice``). Only
recovery and timestamp lookups validate batches while walking them, and only timestamp lookups
decode records (of a single batch).

Index entries follow Kafka's ``LogSegment.append``: a batch gets an entry when more than
``index.interval.bytes`` were appended since the previous entry, the first batch of a segment
never does, and the entry points at the batch's position under its *last* offset.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tierlog.log.config import LogConfig
from tierlog.log.file_slice import FileSlice, OpenFile
from tierlog.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from tierlog.log.names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)
from tierlog.log.txn_index import TransactionIndex
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import (
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    BatchHeader,
    Buffer,
    RecordsError,
    batch_size_at,
    check_batch,
    header_at,
    iter_records,
    walk_headers,
    whole_batches_length,
)

log = logging.getLogger(__name__)

_MAX_RELATIVE = 2**31 - 1
_IOV_MAX = 512
_WALK_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What a segment needs to know about each appended batch to maintain its indexes."""

    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, created_ms: int, *, active: bool
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = created_ms
        self.log_path = directory / offset_file_name(base_offset, LOG_SUFFIX)
        self.index_path = directory / offset_file_name(base_offset, INDEX_SUFFIX)
        self.time_index_path = directory / offset_file_name(base_offset, TIME_INDEX_SUFFIX)
        self.txn_index_path = directory / offset_file_name(base_offset, TXN_INDEX_SUFFIX)
        self.txn_index = TransactionIndex(self.txn_index_path)
        self.max_index_size = config.segment_index_bytes
        self._file: OpenFile | None = OpenFile(
            os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        )
        self.fd = self._file.fd
        self.size = os.fstat(self.fd).st_size
        self.indexes_missing = self.size > 0 and not (
            self.index_path.exists() and self.time_index_path.exists()
        )
        try:
            self.offset_index = OffsetIndex(
                self.index_path, base_offset, config.segment_index_bytes, active
            )
            try:
                self.time_index = TimeIndex(
                    self.time_index_path, base_offset, config.segment_index_bytes, active
                )
            except BaseException:
                self.offset_index.close()
                raise
        except BaseException:
            # a roll that fails here (EMFILE, ENOMEM from mmap) is retried by the next
            # append: what was opened must not stay open, or each retry leaks more
            os.close(self.fd)
            raise
        self.bytes_since_last_index_entry = 0
        last_time = self.time_index.last_entry()
        self.max_timestamp_so_far = last_time.timestamp
        self.offset_of_max_timestamp = last_time.offset
        self.rolling_based_timestamp: int | None = None
        self.next_offset = base_offset
        """One past the last offset in this segment; set by ``load_tail``/``recover``/append."""
        self.deleted = False

    # -- loading -----------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index cannot belong to this log file."""
        if self.indexes_missing:
            raise CorruptIndexError(f"an index of {self.log_path} is missing")
        self.offset_index.sanity_check(self.size)

    def load_tail(self) -> None:
        """Find the segment's end by walking headers after the last offset-index entry."""
        start = self.offset_index.last_entry().position
        next_offset = self.base_offset
        if self.offset_index.entries:
            next_offset = self.offset_index.last_entry().offset + 1
        first = True
        for h in self.iter_batches(start):
            next_offset = h.next_offset
            if first and self.rolling_based_timestamp is None and start == 0:
                self.rolling_based_timestamp = h.max_timestamp
            first = False
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = h.max_timestamp
                self.offset_of_max_timestamp = h.last_offset
        self.next_offset = next_offset
        self.time_index.sanity_check(next_offset)
        if self.rolling_based_timestamp is None and self.size > 0:
            self.rolling_based_timestamp = self._first_batch_timestamp()

    def _first_batch_timestamp(self) -> int | None:
        for h in self.iter_batches(0):
            return h.max_timestamp
        return None

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Re-validate every batch (CRC included), rebuild both indexes, cut a bad tail.

        ``on_batch`` (a callable taking a BatchHeader) sees each valid batch so the caller
        can rebuild producer state and the epoch cache in the same pass. Returns the number
        of bytes truncated.
        """
        sealed = not self.offset_index.writable
        if sealed:
            self.offset_index.make_writable(self.max_index_size)
            self.time_index.make_writable(self.max_index_size)
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None
        valid_end = 0
        next_offset = self.base_offset
        try:
            for h in self.iter_batches(0, verify_crc=True):
                if h.base_offset < next_offset or h.last_offset - self.base_offset > _MAX_RELATIVE:
                    raise RecordsError(
                        ErrorCode.CORRUPT_MESSAGE,
                        f"batch offsets {h.base_offset}..{h.last_offset} out of order",
                        h.position,
                    )
                if self.rolling_based_timestamp is None:
                    self.rolling_based_timestamp = h.max_timestamp
                self._index_batch(h.position, h.size, h.last_offset, h.max_timestamp)
                if on_batch is not None:
                    on_batch(h)
                next_offset = h.next_offset
                valid_end = h.end
        except RecordsError as exc:
            log.warning(
                "%s: truncating at byte %d of %d: %s", self.log_path, valid_end, self.size, exc
            )
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
        self.next_offset = next_offset
        self.indexes_missing = False
        if sealed:
            self.on_become_inactive()
        return truncated

    def truncate_at(self, position: int) -> None:
        """Cut the file at ``position`` (a batch boundary) and rebuild both indexes from
        what is left (a follower's truncation)."""
        if position < self.size:
            os.ftruncate(self.fd, position)
            self.size = position
        self.recover()

    # -- writing -------------------------------------------------------------------------

    def should_roll(
        self,
        config: LogConfig,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
        jitter_ms: int,
    ) -> bool:
        """Kafka's ``LogSegment.shouldRoll``, checked before an append."""
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            waited = max_timestamp_in_messages - self.rolling_based_timestamp
        else:
            waited = now_ms - self.created_ms
        return (
            self.size > config.segment_bytes - messages_size
            or (self.size > 0 and waited > config.segment_ms - jitter_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not 0 <= max_offset_in_messages - self.base_offset <= _MAX_RELATIVE
        )

    def append(self, buffers: Sequence[Buffer], batches: Sequence[BatchInfo]) -> None:
        """Write ``buffers`` (whole batches, possibly split into pieces) at the end."""
        start = self.size
        total = sum(b.size for b in batches)
        try:
            pos = start
            for i in range(0, len(buffers), _IOV_MAX):
                pos += os.pwritev(self.fd, buffers[i : i + _IOV_MAX], pos)
            if pos - start != total:
                raise OSError(f"short write: {pos - start} of {total} bytes")
        except OSError:
            os.ftruncate(self.fd, start)
            raise
        self.size = start + total
        if self.rolling_based_timestamp is None and batches:
            self.rolling_based_timestamp = batches[0].max_timestamp
        position = start
        for b in batches:
            self._index_batch(position, b.size, b.last_offset, b.max_timestamp)
            position += b.size
        self.next_offset = batches[-1].last_offset + 1 if batches else self.next_offset

    def _index_batch(self, position: int, size: int, last_offset: int, max_ts: int) -> None:
        if max_ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            if not self.offset_index.is_full():
                self.offset_index.append(last_offset, position)
            if not self.time_index.is_full():
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp
                )
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def on_become_inactive(self) -> None:
        """Seal: write the reserved last time-index entry, then trim both indexes."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim()
        self.time_index.trim()

    def make_active(self, config: LogConfig) -> None:
        self.max_index_size = config.segment_index_bytes
        self.offset_index.make_writable(config.segment_index_bytes)
        self.time_index.make_writable(config.segment_index_bytes)
        self.index_interval_bytes = config.index_interval_bytes

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    # -- reading -------------------------------------------------------------------------

    def iter_batches(
        self, start: int, end: int | None = None, *, verify_crc: bool = False
    ) -> Iterator[BatchHeader]:
        """Headers of the batches in ``[start, end)`` with file positions.

        Reads in chunks that always hold whole batches, so the same validation as the
        produce path applies; raises RecordsError (with a file position) at the first bad
        or torn batch.
        """
        limit = self.size if end is None else end
        pos = start
        while pos < limit:
            buf = os.pread(self.fd, min(_WALK_CHUNK, limit - pos), pos)
            if len(buf) >= LOG_OVERHEAD and len(buf) < batch_size_at(buf) <= limit - pos:
                buf = os.pread(self.fd, batch_size_at(buf), pos)  # one batch beyond a chunk
            # whole batches only, so a batch cut by the chunk's end is read again from its
            # start; none whole means the first is bad or torn, and check_batch says which
            end = whole_batches_length(buf) or len(buf)
            off = 0
            while off < end:
                try:
                    h = check_batch(buf, off, end, verify_crc)
                except RecordsError as exc:
                    exc.position = pos + off
                    raise
                yield h._replace(position=pos + off)
                off += h.size
            pos += off

    def read_batch(self, header: BatchHeader) -> bytes:
        """The bytes of one batch found by ``iter_batches`` (a control batch to decode)."""
        return os.pread(self.fd, header.size, header.position)

    def translate_offset(self, offset: int, max_position: int) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset`` (it may start before it).

        Walks batch headers only (one small ``pread`` per batch passed over): the batches
        were validated when they were appended or recovered, and the Fetch that asks reads
        the batch itself right after, so reading it here too would read every byte twice.
        Where the walk ends short of ``max_position`` without the offset, the bytes there
        are damaged, and the validating walk says how."""
        start = self.offset_index.lookup(offset).position
        end = start
        for h in walk_headers(self._pread, start, max_position):
            if h.last_offset >= offset:
                return h
            end = h.position + h.size
        if end < max_position:
            for h in self.iter_batches(end, max_position):  # raises at the damage
                if h.last_offset >= offset:
                    return h
        return None

    def _pread(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def read(
        self, offset: int, max_size: int, max_position: int, min_one_message: bool
    ) -> tuple[BatchHeader, bytes | memoryview] | None:
        """Whole batches starting at the one holding ``offset``; None if past this segment."""
        first = self.translate_offset(offset, max_position)
        if first is None:
            return None
        budget = max(max_size, first.size) if min_one_message else max_size
        fetch = min(max_position - first.position, budget)
        if fetch <= 0:
            return first, b""
        data = os.pread(self.fd, fetch, first.position)
        whole = whole_batches_length(data)
        if whole == len(data):
            return first, data
        return first, memoryview(data)[:whole]

    def slice(
        self, offset: int, max_size: int, max_position: int, min_one_message: bool
    ) -> tuple[BatchHeader, FileSlice] | None:
        """What ``read`` returns, as a range of the file rather than its bytes: the batches
        are only sent, so only the headers that place the range's ends are read."""
        file = self._file
        if file is None:  # as ``read`` fails on a closed segment
            raise OSError(errno.EBADF, f"segment {self.base_offset} is closed")
        first = self.translate_offset(offset, max_position)
        if first is None:
            return None
        budget = max(max_size, first.size) if min_one_message else max_size
        limit = min(max_position, first.position + budget)
        end, next_offset = self._last_whole_batch_end(first, limit)
        return first, FileSlice(file, first.position, end - first.position, next_offset)

    def _last_whole_batch_end(self, first: BatchHeader, limit: int) -> tuple[int, int]:
        """The end of the last whole batch from ``first`` up to file position ``limit``, and
        the offset after it (or, in a compacted log, the base offset of the batch after it:
        an upper bound, as Kafka's ``fetchUpperBoundOffset`` is).

        The walk starts at the offset index's last entry below ``limit`` (a batch start,
        at most ``index.interval.bytes`` plus one batch before it), so a range of many
        small batches costs one short ``pread``, and one of large batches a header each."""
        if limit < first.position + first.size:
            return first.position, first.base_offset
        entry = self.offset_index.floor_position(limit - 1)
        start = first.position if entry is None else max(first.position, entry.position)
        read_at: Callable[[int, int], Buffer] = self._pread
        if limit - start <= _WALK_CHUNK:  # with the header after ``limit``, if there is one
            buf = memoryview(os.pread(self.fd, limit - start + RECORDS_OFFSET, start))

            def read_at(position: int, size: int) -> Buffer:
                return buf[position - start : position - start + size]

        pos, next_offset = start, first.base_offset
        while pos < limit:
            h = header_at(read_at(pos, RECORDS_OFFSET))
            if h is None:
                break
            if pos + h.size > limit:  # ``first`` fits, so this batch follows a whole one
                next_offset = h.base_offset
                break
            pos += h.size
            next_offset = h.next_offset
        return pos, next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """(offset, timestamp, partition leader epoch) of the first record at or after it."""
        floor = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(floor.offset, starting_offset)).position
        for h in self.iter_batches(position):
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                data = os.pread(self.fd, h.size, h.position)
                for rec in iter_records(data, h._replace(position=0)):
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.offset, rec.timestamp, h.partition_leader_epoch
        return None

    def batch_at_max_timestamp(self) -> BatchHeader | None:
        """The first batch holding this segment's largest timestamp (ListOffsets -3)."""
        if self.max_timestamp_so_far < 0:
            return None
        start = self.offset_index.lookup(self.offset_of_max_timestamp).position
        for h in self.iter_batches(start):
            if h.max_timestamp == self.max_timestamp_so_far:
                return h
        for h in self.iter_batches(0):
            if h.max_timestamp == self.max_timestamp_so_far:
                return h
        return None

    @property
    def largest_timestamp(self) -> int:
        """Kafka: the max batch timestamp, or the file's mtime when no batch had one."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return int(os.stat(self.log_path).st_mtime * 1000) if not self.deleted else 0

    # -- deletion ------------------------------------------------------------------------

    def files(self) -> list[Path]:
        return [self.log_path, self.index_path, self.time_index_path, self.txn_index_path]

    def rename_to_deleted(self) -> list[Path]:
        """Hide the files from a restart; the log fd stays open for in-flight reads."""
        self.offset_index.close()
        self.time_index.close()
        renamed = []
        for path in self.files():
            if path.exists():
                target = path.with_name(path.name + DELETED_SUFFIX)
                os.replace(path, target)
                renamed.append(target)
        self.deleted = True
        return renamed

    def close(self) -> None:
        """Close the indexes and let go of the ``.log`` file: it closes now, or once the
        last ``FileSlice`` of it still waiting to be sent is gone."""
        self.offset_index.close()
        self.time_index.close()
        self.fd = -1
        self._file = None
