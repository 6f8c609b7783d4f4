"""The cleaner's memory-bounded map from a key's hash to the latest offset of that key.

It follows Kafka's ``SkimpyOffsetMap``: one preallocated byte table of fixed slots, each
holding a 16-byte MD5 of the key and the 8-byte offset, so the memory a cleaner thread uses is
its share of ``log.cleaner.dedupe.buffer.size`` whatever the keys look like. A slot is empty
while its hash bytes are all zero. Two keys whose hashes collide share a slot; with 128-bit
hashes that is as unlikely as it is in Kafka, and the cost would be one stale record kept or
one older record dropped for a key that was overwritten anyway.

The map is filled only up to ``load_factor`` of its slots (``log.cleaner.io.buffer.load.factor``,
0.9): linear probing stays short, and a dirty section with more keys than that is cleaned in
several passes, each ending at ``latest_offset``.
"""

from __future__ import annotations

import hashlib
import mmap
import struct

HASH_SIZE = 16
ENTRY_SIZE = HASH_SIZE + 8
_EMPTY = bytes(HASH_SIZE)
_OFFSET = struct.Struct(">q")
_PROBE = struct.Struct(">Q")
_md5 = hashlib.md5


class OffsetMap:
    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(memory // ENTRY_SIZE, 1)
        self.max_entries = int(self.slots * load_factor)
        if self.max_entries < 1:
            raise ValueError(
                "the offset map is too small to hold even one key: raise "
                "log.cleaner.dedupe.buffer.size or lower log.cleaner.threads"
            )
        self._memory = self.slots * ENTRY_SIZE
        self._table = mmap.mmap(-1, self._memory)
        self.size = 0
        self.latest_offset = -1
        """Last offset of the dirty section this map covers; records above it are kept."""
        self.lookups = 0
        self.probes = 0

    @staticmethod
    def hash_key(key: bytes) -> bytes:
        return _md5(key, usedforsecurity=False).digest()

    def is_full(self, extra: int = 0) -> bool:
        """True if ``extra`` more keys would take the map past its load factor."""
        return self.size + extra > self.max_entries

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(position, found): the slot holding ``digest`` or the empty one it would go to."""
        slot = _PROBE.unpack_from(digest, 0)[0] % self.slots
        table = self._table
        self.lookups += 1
        while True:
            pos = slot * ENTRY_SIZE
            stored = table[pos : pos + HASH_SIZE]
            if stored == digest:
                return pos, True
            if stored == _EMPTY:
                return pos, False
            self.probes += 1
            slot += 1
            if slot == self.slots:
                slot = 0

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the latest for ``key`` (offsets are put in log order)."""
        digest = _md5(key, usedforsecurity=False).digest()
        pos, found = self._find(digest)
        if not found:
            if self.size >= self.slots - 1:
                raise OverflowError("offset map has no free slot")
            self._table[pos : pos + HASH_SIZE] = digest
            self.size += 1
        _OFFSET.pack_into(self._table, pos + HASH_SIZE, offset)

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``, or -1. ``_find`` inlined: the filter pass asks
        this once per record."""
        digest = _md5(key, usedforsecurity=False).digest()
        slots = self.slots
        slot = _PROBE.unpack_from(digest, 0)[0] % slots
        table = self._table
        self.lookups += 1
        while True:
            pos = slot * ENTRY_SIZE
            stored = table[pos : pos + HASH_SIZE]
            if stored == digest:
                offset: int = _OFFSET.unpack_from(table, pos + HASH_SIZE)[0]
                return offset
            if stored == _EMPTY:
                return -1
            self.probes += 1
            slot += 1
            if slot == slots:
                slot = 0

    def clear(self) -> None:
        """Empty the map for the next log. The table is an anonymous mapping: a page costs
        memory only once a key lands in it, and clearing returns every page to the system
        and maps a fresh zeroed table, instead of zeroing touched pages from Python."""
        self._table.close()
        self._table = mmap.mmap(-1, self._memory)
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    def close(self) -> None:
        self._table.close()

    @property
    def utilization(self) -> float:
        return self.size / self.slots
