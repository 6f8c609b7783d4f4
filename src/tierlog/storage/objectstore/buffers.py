"""Reused, page-aligned receive buffers for chunk GETs.

A cold read's largest CPU cost after the transfer itself is fresh memory: every new 4 MiB
buffer is backed by the kernel one zeroed page at a time, on first touch, about a thousand
page faults per chunk (0.3-0.4 CPU-s per GiB on this project's VMs, more than the copy out
of the socket). A pool of slots that are touched once and then reused removes that cost,
and because every slot starts on a page boundary, the disk cache can write a chunk with
``O_DIRECT`` straight from the slot instead of copying it into an aligned buffer first.

Reuse is only safe once nothing can read the old contents: the chunk is served to Fetches
as views, and a view may be held by a socket write that has not finished. Python 3.11 has
no hook for "the last view of this buffer was released" on a plain buffer, so each lease
exports its slot through a ctypes array made with ``from_buffer``: every view of the
lease refers to that array, and a weak-reference finaliser on it fires exactly when the
last view is gone. Only then does the slot return to the free list. Nothing waits for a
slot: an empty pool answers None and the caller uses its ordinary allocation.

The free list is last-in first-out, so the slots that are resident are the ones reused and
the resident size follows the peak number of chunks held at once, up to the capacity.

``pretouch`` makes the whole pool resident up front instead, as the JVM's
``-XX:+AlwaysPreTouch`` does for a heap: the first cold reads after a start then cost what
later ones do. On a VM whose balloon reports free guest pages to the host (virtio
``free page reporting``), the first touch of a page the host took back costs more than ten
times an ordinary fault, 6-10 CPU-seconds per GiB on this project's VMs, so the pool's
first use could double a backfill's CPU and slow it on a busy core.

A pretouched pool also asks for transparent huge pages (``MADV_HUGEPAGE``, which takes
effect where the system's THP mode is ``madvise`` or ``always``). Every chunk is written to
the disk cache with ``O_DIRECT`` from its slot, and the kernel pins the slot's pages for
each write: 512 times fewer pages to pin cost the cache writer 0.07-0.10 CPU-s per GiB
read cold against 0.12-0.13 with 4 KiB pages (three alternating runs each). Only a
pretouched pool, whose whole size is resident anyway: a pool backed as it is used holds
only the pages its chunks touched, and with huge pages every slot a small chunk (a small
segment's, a segment's last) lands in would hold 2 MiB (a load test of 100 partitions
with small segments saw the broker's RSS grow 83 MiB per minute instead of under 60).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import threading
import weakref
from collections import deque

#: ``madvise(2)`` advice that faults a range in writable (Linux 5.14); the ``mmap`` module
#: of Python 3.11 does not name it.
MADV_POPULATE_WRITE = 23
#: What ``madvise`` answers where the kernel does not know an advice.
_ADVICE_UNKNOWN = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})


def _advise_huge_pages(memory: mmap.mmap, huge: bool) -> None:
    """Ask for transparent huge pages, or for none again; a kernel built without them, or
    a platform whose ``mmap`` has no such advice, keeps the 4 KiB pages (only the cache
    writer's CPU differs)."""
    advice = getattr(mmap, "MADV_HUGEPAGE" if huge else "MADV_NOHUGEPAGE", None)  # Linux
    if advice is None:
        return
    try:
        memory.madvise(advice)
    except OSError as e:
        if e.errno not in _ADVICE_UNKNOWN:
            raise


class ChunkBuffers:
    """``capacity`` slots of ``slot_size`` bytes (rounded up to a page) in one anonymous
    mapping, leased one at a time. The mapping is freed when the pool and every lease are
    gone; ``close`` stops new leases."""

    def __init__(self, slot_size: int, capacity: int) -> None:
        if slot_size <= 0 or capacity <= 0:
            raise ValueError("slot_size and capacity must be positive")
        self.slot_size = -(-slot_size // mmap.PAGESIZE) * mmap.PAGESIZE
        self.capacity = capacity
        # private, not Python's default shared mapping: a first touch of anonymous memory
        # costs ~20 % less than of shared memory (no shmem page cache behind it)
        self._memory = mmap.mmap(
            -1, self.slot_size * capacity, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        )
        # a class of its own, so that ``padded`` knows this pool's slots from other arrays
        self._slot_type: type[ctypes.Array[ctypes.c_char]] = type(
            "_Slot", (ctypes.c_char * self.slot_size,), {}
        )
        self._free: deque[int] = deque(range(capacity - 1, -1, -1))
        self._leased = 0
        self._lock = threading.Lock()
        self._closed = False

    @property
    def leased(self) -> int:
        """Slots out on lease now."""
        return self._leased

    def lease(self, size: int) -> memoryview | None:
        """A writable view of ``size`` bytes at the start of a free slot, or None when the
        pool is empty, closed, or ``size`` does not fit a slot. The slot is free again once
        this view and every view taken from it are released or garbage-collected."""
        if size > self.slot_size or size < 0:
            return None
        with self._lock:
            if self._closed or not self._free:
                return None
            index = self._free.pop()
            self._leased += 1
        slot = self._slot_type.from_buffer(self._memory, index * self.slot_size)
        weakref.finalize(slot, self._release, index)
        return memoryview(slot).cast("B")[:size]

    def pretouch(self) -> int | None:
        """Back every slot with memory now, one slot at a time, until the pool is closed;
        the bytes made resident. The kernel populates the pages without touching their
        contents (``MADV_POPULATE_WRITE``), so a slot leased meanwhile is not disturbed.
        A kernel without that advice is left as it is: None (writing the pages instead
        could race a GET receiving into a leased slot). Huge pages are asked for first, so
        the slots are populated with them where the system allows."""
        _advise_huge_pages(self._memory, True)
        done = 0
        for index in range(self.capacity):
            if self._closed:
                break
            try:
                self._memory.madvise(MADV_POPULATE_WRITE, index * self.slot_size, self.slot_size)
            except OSError as e:
                if e.errno in _ADVICE_UNKNOWN:
                    _advise_huge_pages(self._memory, False)  # backed as used, after all
                    return None
                raise
            done += self.slot_size
        return done

    def _release(self, index: int) -> None:
        # runs in whichever thread dropped the last view: never while holding ``_lock``,
        # because a lease only takes the lock around the free-list pop, where no view dies
        with self._lock:
            self._leased -= 1
            self._free.append(index)

    def padded(self, view: memoryview, length: int) -> memoryview | None:
        """The first ``length`` bytes of the slot that ``view`` starts, if ``view`` is a
        lease of this pool that starts at its slot's first byte and ``length`` fits the
        slot: the page-aligned source of an ``O_DIRECT`` write. None otherwise."""
        slot = view.obj
        if not isinstance(slot, self._slot_type) or length > self.slot_size:
            return None
        if view.readonly or not view.c_contiguous:
            return None
        if ctypes.addressof(ctypes.c_char.from_buffer(view)) != ctypes.addressof(slot):
            return None
        return memoryview(slot).cast("B")[:length]

    def close(self) -> None:
        """No new leases; the memory goes when the last lease does."""
        with self._lock:
            self._closed = True
