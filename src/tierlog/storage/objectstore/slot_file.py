"""One file of fixed-size slots: where the disk chunk cache keeps its chunks.

A file per cached chunk costs the file system an inode for every chunk a cold read
fetches: created, truncated, renamed into place, and unlinked when evicted. Under a cold
read that was about a third of the cache writer's CPU (ext4 searching its recently deleted
inodes, the journal), for entries that are never trusted across a restart anyway (the
cache directory is wiped at start). Here every entry is written in place, with one
``pwrite`` into a free slot of a single file: no inode, no directory entry, no rename.

A hit maps its slot (``map``), as the file store mapped its file, so a reader touches only
the pages it reads. A file can be unlinked under a mapping; a slot cannot be overwritten
under one. So each mapping pins its slot: the pin is released by a weak-reference
finaliser on the ``mmap`` object, which fires once the last view of the mapping is gone
(a Fetch response on a slow socket, a parked cursor). A slot whose entry was evicted
(``release``) becomes free only when its pins are gone, and a handle maps only while it is
still the slot's live entry, so a reader racing an eviction gets None (and loads the chunk
again) rather than another chunk's bytes.

The file is sparse and grows to the highest slot written; free slots are reused last-in
first-out, so it stays as small as the peak number of entries allows. Its size never
exceeds ``slots * slot_size``.
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

#: ``O_DIRECT`` where the platform has it (Linux), else 0: buffered writes.
_O_DIRECT: int = os.O_DIRECT if sys.platform == "linux" else 0

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True, eq=False)
class SlotHandle:
    """One stored entry: its slot and its length. Compared by identity: a slot reused for
    a new entry gets a new handle, and the old one no longer maps."""

    index: int
    size: int


class SlotFile:
    """``slots`` slots of ``slot_size`` bytes (rounded up to a page) in the file at
    ``path``, created empty (an existing file is replaced). Thread-safe."""

    def __init__(self, path: Path, slot_size: int, slots: int) -> None:
        if slot_size <= 0 or slots <= 0:
            raise ValueError("slot_size and slots must be positive")
        self.slot_size = -(-slot_size // mmap.PAGESIZE) * mmap.PAGESIZE
        self.slots = slots
        self._path = path
        self.direct = _O_DIRECT != 0
        """Writes bypass the page cache: the caller passes a page-aligned buffer whose
        length is a multiple of the page size (``padded_length``). Turned off for good
        where the file system refuses ``O_DIRECT``."""
        self._fd = self._open(os.O_CREAT | os.O_TRUNC)
        self._free = list(range(slots - 1, -1, -1))  # last in, first out: slot 0 first
        self._live: list[SlotHandle | None] = [None] * slots
        self._pins = [0] * slots
        self._lock = threading.Lock()
        self._closed = False

    def _open(self, extra: int) -> int:
        flags = os.O_RDWR | extra
        if self.direct:
            try:
                return os.open(self._path, flags | _O_DIRECT, 0o600)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                self.direct = False
        return os.open(self._path, flags, 0o600)

    @property
    def free(self) -> int:
        """Slots free for a new entry now."""
        with self._lock:
            return len(self._free)

    def padded_length(self, size: int) -> int:
        """The length a direct write of ``size`` bytes must have."""
        return -(-size // mmap.PAGESIZE) * mmap.PAGESIZE

    def take(self) -> int | None:
        """Reserve a free slot for ``write``, or None when every slot holds an entry or is
        still mapped by a reader of an evicted one."""
        with self._lock:
            if self._closed or not self._free:
                return None
            return self._free.pop()

    def give_back(self, index: int) -> None:
        """Return a slot reserved by ``take`` that was not written."""
        with self._lock:
            self._free.append(index)

    def write(self, index: int, data: Buffer, size: int) -> SlotHandle:
        """Write the entry's ``size`` bytes into the reserved slot ``index`` and make it
        live. ``data`` starts with those bytes; with ``direct`` it is page-aligned and
        ``padded_length(size)`` long. On failure the slot is free again and the error is
        raised."""
        try:
            self._write_at(index * self.slot_size, data, size)
        except BaseException:
            self.give_back(index)
            raise
        handle = SlotHandle(index, size)
        with self._lock:
            self._live[index] = handle
        return handle

    def _write_at(self, offset: int, data: Buffer, size: int) -> None:
        view = memoryview(data)
        if self.direct:
            try:
                self._pwrite_all(view[: self.padded_length(size)], offset)
                return
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                # the file system took O_DIRECT at open but refuses the write: buffered
                # from now on, through a descriptor without the flag
                with self._lock:
                    self.direct = False
                    old, self._fd = self._fd, self._open(0)
                os.close(old)
        self._pwrite_all(view[:size], offset)

    def _pwrite_all(self, view: memoryview, offset: int) -> None:
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], offset + written)

    def map(self, handle: SlotHandle) -> memoryview | bytes | None:
        """The entry's bytes as a read-only view of its slot, pinned until the view and
        every view taken from it are gone; None when ``handle`` is no longer the slot's
        entry (evicted meanwhile) or the file is closed."""
        index = handle.index
        with self._lock:
            if self._closed or self._live[index] is not handle:
                return None
            if handle.size == 0:
                return b""
            self._pins[index] += 1
            fd = self._fd
        try:
            mapping = mmap.mmap(
                fd, handle.size, offset=index * self.slot_size, access=mmap.ACCESS_READ
            )
        except (OSError, ValueError):  # closed under us: the caller loads it again
            self._unpin(index)
            return None
        weakref.finalize(mapping, self._unpin, index)
        return memoryview(mapping)

    def release(self, handle: SlotHandle) -> None:
        """The entry is gone: its slot is free once no reader maps it. Releasing a handle
        that is no longer live does nothing."""
        index = handle.index
        with self._lock:
            if self._live[index] is not handle:
                return
            self._live[index] = None
            if self._pins[index] == 0:
                self._free.append(index)

    def _unpin(self, index: int) -> None:
        # runs in whichever thread dropped the last view; never under ``_lock``, since no
        # view is released while it is held
        with self._lock:
            self._pins[index] -= 1
            if self._pins[index] == 0 and self._live[index] is None:
                self._free.append(index)

    def close(self) -> None:
        """No new writes or mappings; mappings already made stay readable (each holds its
        own descriptor)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            fd = self._fd
        os.close(fd)
