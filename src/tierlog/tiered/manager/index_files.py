"""Read-only views over Kafka index files fetched from the remote tier.

Remote indexes are cached on local disk and memory-mapped, so a lookup costs a binary search
over the mapping and nothing is parsed up front. The views validate the structural
invariants Kafka checks (``sanityCheck``) when opened, so a damaged download is detected
before it can send a reader to a wrong byte position.

Formats (big-endian): offset index entries are ``relativeOffset i32, position i32``; time
index entries ``timestamp i64, relativeOffset i32``; transaction index entries
``version i16, producerId i64, firstOffset i64, lastOffset i64, lastStableOffset i64``.
A trailing run of all-zero entries is preallocation padding and is ignored.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AbortedTxn",
    "CorruptIndexError",
    "MappedIndex",
    "OffsetIndexView",
    "TimeIndexView",
    "parse_txn_index",
]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")


class CorruptIndexError(Exception):
    """An index file fails Kafka's sanity checks; the cached copy must be re-fetched."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


#: Index files below this size are read into memory instead of mapped. A mapping costs at
#: least a page of RSS and a kernel VMA whatever the file's size; the indexes of small
#: segments are a few hundred bytes, so a cache of thousands of them mapped cost ~10x its
#: byte budget in RSS (and could approach ``vm.max_map_count``).
MMAP_MIN_BYTES = 64 * 1024


class MappedIndex:
    """One index file: memory-mapped when large, read into bytes when small."""

    def __init__(self, path: Path, entry_size: int) -> None:
        self.path = path
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size % entry_size:
                raise CorruptIndexError(
                    f"{path.name}: size {size} is not a multiple of {entry_size}"
                )
            if size >= MMAP_MIN_BYTES:
                self._buf: mmap.mmap | bytes = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                pages = -(-size // mmap.PAGESIZE)
                self.memory_bytes = pages * mmap.PAGESIZE
            else:
                f.seek(0)
                self._buf = f.read()
                self.memory_bytes = size
        self.size_bytes = size
        self.entry_size = entry_size
        n = size // entry_size
        zero = bytes(entry_size)
        while n > 1 and self._buf[(n - 1) * entry_size : n * entry_size] == zero:
            n -= 1
        self.entries = n

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._buf = b""
        self.entries = 0


class OffsetIndexView(MappedIndex):
    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, _OFFSET_ENTRY.size)
        self.base_offset = base_offset
        prev = -1
        for i in range(self.entries):
            rel, pos = _OFFSET_ENTRY.unpack_from(self._buf, i * 8)
            if rel <= prev or pos < 0:
                raise CorruptIndexError(f"{path.name}: entry {i} ({rel}, {pos}) is out of order")
            prev = rel

    def entry(self, i: int) -> tuple[int, int]:
        rel, pos = _OFFSET_ENTRY.unpack_from(self._buf, i * 8)
        return self.base_offset + rel, pos

    def lookup(self, offset: int) -> int:
        """Byte position of the largest indexed offset <= ``offset`` (0 below the first)."""
        lo, hi, found = 0, self.entries - 1, -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[0] <= offset:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return 0 if found < 0 else self.entry(found)[1]


class TimeIndexView(MappedIndex):
    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, _TIME_ENTRY.size)
        self.base_offset = base_offset
        prev_ts, prev_rel = -(2**63), -1
        for i in range(self.entries):
            ts, rel = _TIME_ENTRY.unpack_from(self._buf, i * 12)
            if ts < prev_ts or rel < prev_rel:
                raise CorruptIndexError(f"{path.name}: entry {i} ({ts}, {rel}) is out of order")
            prev_ts, prev_rel = ts, rel

    def entry(self, i: int) -> tuple[int, int]:
        ts, rel = _TIME_ENTRY.unpack_from(self._buf, i * 12)
        return ts, self.base_offset + rel

    def lookup(self, timestamp: int) -> int:
        """Offset of the largest entry with timestamp <= ``timestamp`` (base offset if none)."""
        lo, hi, found = 0, self.entries - 1, -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[0] <= timestamp:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return self.base_offset if found < 0 else self.entry(found)[1]


def parse_txn_index(path: Path) -> list[AbortedTxn]:
    data = path.read_bytes()
    if len(data) % _TXN_ENTRY.size:
        raise CorruptIndexError(f"{path.name}: size {len(data)} is not a multiple of 34")
    out = []
    for i in range(0, len(data), _TXN_ENTRY.size):
        _v, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, i)
        if last < first:
            raise CorruptIndexError(f"{path.name}: aborted txn {first}..{last} is inverted")
        out.append(AbortedTxn(pid, first, last, lso))
    return out
