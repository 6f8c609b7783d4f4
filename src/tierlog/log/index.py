"""Offset and time indexes in Kafka's byte format.

* ``.index``: 8-byte entries, relative offset u32 + file position u32.
* ``.timeindex``: 12-byte entries, timestamp i64 + relative offset u32.

Both are sparse (one entry per ``index.interval.bytes`` of log), preallocated to
``segment.index.bytes`` while the segment is active and trimmed to their entries when it is
sealed, as Kafka does. Files are memory-mapped: appends are a ``pack_into`` and lookups a
binary search without reading the file into Python objects.

A sealed index copied from elsewhere (the remote tier's, cached on local disk) is opened with
``load_sealed``, which also runs the structural checks Kafka's ``sanityCheck`` implies on every
entry, so a damaged download is detected before it can send a reader to a wrong position.
A trailing run of all-zero entries there is preallocation padding and is ignored.

Fullness follows Kafka exactly because it decides when segments roll: the offset index is full
at ``maxEntries``, the time index one entry earlier, because its last slot is kept for the
entry written when the segment is sealed.
"""

from __future__ import annotations

import abc
import mmap
import os
import struct
from pathlib import Path
from typing import NamedTuple, TypeVar

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")


class CorruptIndexError(Exception):
    """The index file is inconsistent with its segment; the caller rebuilds it."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


#: Sealed indexes smaller than this are held as bytes instead of a mapping (see ``_seal``).
FREEZE_MAX_BYTES = 64 * 1024


_MAX_I32 = 0x7FFFFFFF

_Index = TypeVar("_Index", bound="_MappedIndex")


class _MappedIndex(abc.ABC):
    entry_size = 8
    #: The key entries are sorted by, at the start of each entry (see ``_floor``).
    _leading_key = _U32

    def __init__(self, path: Path, base_offset: int, max_index_size: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self._closed = False
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        length = os.fstat(self._fd).st_size
        self._entries = length // self.entry_size
        self._mmap: mmap.mmap | None = None
        self._frozen: bytes | None = None
        self._max_entries = self._entries
        self.writable = False
        if writable:
            self.make_writable(max_index_size)
        else:
            self._remap(self._entries * self.entry_size)
            self._seal()

    @classmethod
    def load_sealed(cls: type[_Index], path: Path, base_offset: int) -> _Index:
        """Open the sealed index at ``path`` read-only, checked entry by entry; raises
        ``CorruptIndexError`` when it fails the checks (see the module doc)."""
        size = os.stat(path).st_size
        if size % cls.entry_size:
            raise CorruptIndexError(
                f"{path.name}: size {size} is not a multiple of {cls.entry_size}"
            )
        index = cls(path, base_offset, 0, writable=False)
        try:
            index._drop_zero_padding()
            index.check_entries()
        except BaseException:
            index.close()
            raise
        return index

    def _drop_zero_padding(self) -> None:
        zero = bytes(self.entry_size)
        n = self._entries
        if n:
            buf = self._mm()
            while n > 1 and buf[(n - 1) * self.entry_size : n * self.entry_size] == zero:
                n -= 1
        self._entries = n

    @abc.abstractmethod
    def check_entries(self) -> None:
        """Raise ``CorruptIndexError`` unless every entry is in order."""

    @abc.abstractmethod
    def entry(self, n: int) -> OffsetPosition | TimestampOffset:
        """Entry ``n``, with its offset made absolute."""

    def _floor(self, key: int, field: struct.Struct | None = None, field_at: int = 0) -> int:
        """The last entry whose key is at most ``key``, or -1: a binary search that reads
        only the keys it compares, in place. The key is the leading one unless ``field`` and
        ``field_at`` name another that grows with it (an offset entry's position)."""
        mm = self._mmap if self._mmap is not None else self._frozen
        unpack = (field or self._leading_key).unpack_from
        size = self.entry_size
        lo, hi = 0, self._entries - 1
        found = -1
        while mm is not None and lo <= hi:
            mid = (lo + hi) >> 1
            (at,) = unpack(mm, mid * size + field_at)
            if at <= key:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def truncate_to(self, offset: int) -> None:
        """Keep only entries below ``offset`` (the log was truncated there)."""
        n = self._entries
        while n > 0 and self.entry(n - 1).offset >= offset:
            n -= 1
        self._entries = n

    @property
    def memory_bytes(self) -> int:
        """What holding the index costs in memory: a mapping counts whole pages."""
        if self._mmap is not None:
            return -(-len(self._mmap) // mmap.PAGESIZE) * mmap.PAGESIZE
        return len(self._frozen) if self._frozen is not None else 0

    # -- file management --------------------------------------------------------------

    def _ensure_fd(self) -> int:
        if self._fd < 0:
            if self._closed:
                raise ValueError(f"{self.path}: index is closed")
            self._fd = os.open(self.path, os.O_RDWR)
        return self._fd

    def _release_fd(self) -> None:
        if self._fd >= 0 and not self.writable:
            os.close(self._fd)
            self._fd = -1

    def _seal(self) -> None:
        """A sealed index never changes: keep one descriptor per segment (its ``.log``),
        not three. Python's mmap holds a dup of the file's descriptor (``trackfd`` only
        exists from 3.13), so a small sealed index is copied into bytes and unmapped; a
        large one stays mapped (few segments are that large). With three descriptors each,
        the thousands of small untiered segments a store outage leaves behind would run into
        the fd limit."""
        if self._mmap is not None and len(self._mmap) < FREEZE_MAX_BYTES:
            self._frozen = self._mmap[:]
            self._mmap.close()
            self._mmap = None
        self._release_fd()

    def _remap(self, length: int) -> None:
        self._frozen = None
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        fd = self._ensure_fd()
        os.ftruncate(fd, length)
        if length > 0:
            self._mmap = mmap.mmap(fd, length)
        self._max_entries = length // self.entry_size

    def _file_size(self) -> int:
        return os.fstat(self._fd).st_size if self._fd >= 0 else os.stat(self.path).st_size

    def make_writable(self, max_index_size: int) -> None:
        """Preallocate to ``max_index_size`` (rounded down to whole entries)."""
        size = max(max_index_size // self.entry_size, self._entries) * self.entry_size
        self._remap(size)
        self.writable = True

    def trim(self) -> None:
        """Shrink the file to its entries: sealed segments keep no slack."""
        self._remap(self._entries * self.entry_size)
        self.writable = False
        self._seal()

    def flush(self) -> None:
        if self._mmap is not None:
            self._mmap.flush()

    def close(self) -> None:
        self._closed = True
        self._entries = 0
        self._frozen = None
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def reset(self) -> None:
        """Drop every entry (before a rebuild).

        Truncating to zero and growing back gives a sparse, all-zero file without touching
        (and later flushing) every page of a preallocated index: zero-filling a 10 MiB
        mmap costs ~35 ms per empty partition at recovery.
        """
        self._entries = 0
        current = self._mmap if self._mmap is not None else self._frozen
        if current is not None:
            size = len(current)
            self._remap(0)
            self._remap(size)  # mapped again: the rebuild writes into it, then trims
            self._release_fd()

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def _relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= 0xFFFFFFFF:
            raise ValueError(f"offset {offset} not relative to base {self.base_offset}")
        return rel

    def _mm(self) -> mmap.mmap | bytes:
        if self._mmap is not None:
            return self._mmap
        assert self._frozen is not None
        return self._frozen


class OffsetIndex(_MappedIndex):
    entry_size = 8

    def entry(self, n: int) -> OffsetPosition:
        rel, pos = _OFFSET_ENTRY.unpack_from(self._mm(), n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(self._entries - 1)

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise ValueError(f"offset index {self.path} is full")
        if self._entries and offset <= self.last_entry().offset:
            raise ValueError(f"offset {offset} not above last indexed {self.last_entry()}")
        _OFFSET_ENTRY.pack_into(self._mm(), self._entries * 8, self._relative(offset), position)
        self._entries += 1

    def lookup(self, offset: int) -> OffsetPosition:
        """Floor entry for ``offset``, or (base offset, 0) when none is smaller."""
        found = self._floor(offset - self.base_offset)
        if found < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(found)

    def floor_position(self, position: int) -> OffsetPosition | None:
        """The last entry at or below file ``position``, or None: a batch start near a
        byte range's end, from which a read finds the range's last whole batch without
        reading the batches before it."""
        found = self._floor(position, _U32, 4)
        return None if found < 0 else self.entry(found)

    def sanity_check(self, log_size: int) -> None:
        """Kafka's cheap check (length and last entry), run when a segment is opened."""
        length = self._file_size()
        if length % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {length} not a multiple of 8")
        if self._entries:
            first, last = self.entry(0), self.last_entry()
            if last.offset < first.offset or last.position > log_size:
                raise CorruptIndexError(f"{self.path}: last entry {last} inconsistent")

    def check_entries(self) -> None:
        prev = -1
        mm = self._mm() if self._entries else b""
        for i in range(self._entries):
            rel, pos = _OFFSET_ENTRY.unpack_from(mm, i * 8)
            if rel <= prev or rel > _MAX_I32 or pos > _MAX_I32:
                raise CorruptIndexError(
                    f"{self.path.name}: entry {i} ({rel}, {pos}) is out of order"
                )
            prev = rel


def readable_offset_entries(data: bytes, base_offset: int) -> list[OffsetPosition]:
    """The entries of ``.index`` bytes read while the broker may still be writing them (an
    active segment's file is preallocated with zeros): they end at the first entry that does
    not move both the offset and the position forward. For readers outside the broker that
    only need a starting point, such as the Spark executors; the broker's own indexes are
    opened with ``OffsetIndex`` instead, which checks every entry."""
    entries: list[OffsetPosition] = []
    last_rel = last_pos = -1
    for rel, pos in _OFFSET_ENTRY.iter_unpack(memoryview(data)[: len(data) // 8 * 8]):
        if entries and (rel <= last_rel or pos <= last_pos):
            break
        entries.append(OffsetPosition(base_offset + rel, pos))
        last_rel, last_pos = rel, pos
    return entries


class TimeIndex(_MappedIndex):
    entry_size = 12
    _leading_key = _I64

    def entry(self, n: int) -> TimestampOffset:
        ts, rel = _TIME_ENTRY.unpack_from(self._mm(), n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(-1, self.base_offset)
        return self.entry(self._entries - 1)

    def is_full(self) -> bool:
        return self._entries >= self._max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append only if ``timestamp`` is above the last entry's, as Kafka does."""
        if not skip_full_check and self.is_full():
            raise ValueError(f"time index {self.path} is full")
        last = self.last_entry()
        if timestamp <= last.timestamp:
            return
        if self._entries >= self._max_entries:
            return
        _TIME_ENTRY.pack_into(self._mm(), self._entries * 12, timestamp, self._relative(offset))
        self._entries += 1

    def lookup(self, timestamp: int) -> TimestampOffset:
        """Last entry with timestamp <= ``timestamp``, or (-1, base offset)."""
        found = self._floor(timestamp)
        if found < 0:
            return TimestampOffset(-1, self.base_offset)
        return self.entry(found)

    def sanity_check(self, log_end_offset: int) -> None:
        length = self._file_size()
        if length % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {length} not a multiple of 12")
        if self._entries:
            first, last = self.entry(0), self.last_entry()
            if last.timestamp < first.timestamp or last.offset < first.offset:
                raise CorruptIndexError(f"{self.path}: last entry {last} before first {first}")
            if last.offset > log_end_offset:
                raise CorruptIndexError(f"{self.path}: last entry {last} beyond log end")

    def check_entries(self) -> None:
        prev_ts, prev_rel = -(2**63), 0
        mm = self._mm() if self._entries else b""
        for i in range(self._entries):
            ts, rel = _TIME_ENTRY.unpack_from(mm, i * 12)
            if ts < prev_ts or rel < prev_rel or rel > _MAX_I32:
                raise CorruptIndexError(
                    f"{self.path.name}: entry {i} ({ts}, {rel}) is out of order"
                )
            prev_ts, prev_rel = ts, rel
