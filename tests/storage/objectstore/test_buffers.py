"""The chunk GET buffer pool: a slot is reused only after every view of it is gone."""

from __future__ import annotations

import ctypes
import mmap
import resource
from pathlib import Path

from tierlog.storage.objectstore.buffers import ChunkBuffers

MiB = 1 << 20


def test_a_slot_returns_only_after_its_last_view_is_released() -> None:
    pool = ChunkBuffers(8192, 1)
    view = pool.lease(100)
    assert view is not None
    view[:5] = b"hello"
    part = view[1:3]  # e.g. a Fetch response still waiting on a slow socket
    del view
    assert pool.leased == 1
    assert pool.lease(10) is None
    assert bytes(part) == b"el"
    part.release()
    assert pool.leased == 0
    again = pool.lease(10)
    assert again is not None


def test_an_empty_pool_answers_none_instead_of_waiting() -> None:
    pool = ChunkBuffers(4096, 2)
    held = [pool.lease(4096), pool.lease(1)]
    assert all(v is not None for v in held)
    assert pool.lease(1) is None
    assert pool.lease(4097) is None  # larger than a slot: never from the pool
    pool.close()
    held.clear()
    assert pool.leased == 0
    assert pool.lease(1) is None  # closed


def test_free_slots_are_reused_last_in_first_out() -> None:
    """The slot freed last is leased next, so the resident slots are the reused ones."""
    pool = ChunkBuffers(4096, 4)
    a = pool.lease(10)
    b = pool.lease(10)
    assert a is not None and b is not None
    b[:1] = b"B"
    del b
    c = pool.lease(1)
    assert c is not None and bytes(c) == b"B"


def test_padded_finds_only_the_page_aligned_head_of_one_of_its_slots() -> None:
    pool = ChunkBuffers(10_000, 2)
    assert pool.slot_size % mmap.PAGESIZE == 0
    view = pool.lease(9000)
    assert view is not None
    padded = pool.padded(view, pool.slot_size)
    assert padded is not None and len(padded) == pool.slot_size
    padded.release()
    assert pool.padded(view[1:], 4096) is None  # not the slot's first byte
    assert pool.padded(view, pool.slot_size + 1) is None
    assert pool.padded(memoryview(bytearray(9000)), 4096) is None
    other = ChunkBuffers(10_000, 1).lease(10)
    assert other is not None and pool.padded(other, 4096) is None


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_pretouch_makes_every_slot_resident_and_leaves_a_leased_one_as_it_was() -> None:
    """After ``pretouch`` every page of the pool is resident and writing every slot takes
    no page faults; a chunk received into a slot before it is still there."""
    slots, slot_size = 8, MiB
    pool = ChunkBuffers(slot_size, slots)
    leased = pool.lease(slot_size)
    assert leased is not None
    leased[:4] = b"keep"
    assert pool.pretouch() == slots * slot_size
    assert bytes(leased[:4]) == b"keep"
    views = [leased] + [pool.lease(slot_size) for _ in range(slots - 1)]
    for view in views:
        assert view is not None
        assert _resident(view) == slot_size
    before = _minor_faults()
    for view in views:
        assert view is not None
        view[:: mmap.PAGESIZE] = b"x" * (slot_size // mmap.PAGESIZE)
    pages = slots * slot_size // mmap.PAGESIZE
    assert _minor_faults() - before < pages // 20


def test_a_pretouched_pool_asks_for_huge_pages_and_one_backed_as_used_does_not() -> None:
    """A pretouched pool (resident whole anyway) advises its mapping ``MADV_HUGEPAGE``
    (``hg`` in its ``VmFlags``), so it is eligible for transparent huge pages unless THP
    is ``never``; whether the kernel finds free huge pages is the kernel's matter. A pool
    backed as it is used does not ask, so a small chunk in a slot holds its own pages, not
    2 MiB."""
    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    pretouched = ChunkBuffers(4 * MiB, 4)
    view = pretouched.lease(MiB)
    assert view is not None
    assert pretouched.pretouch() == 16 * MiB
    advised = _mapping(view)
    assert "hg" in advised["VmFlags"].split()
    assert advised["THPeligible"] == ("0" if "[never]" in mode else "1")

    used = ChunkBuffers(4 * MiB, 4)
    slot = used.lease(4 * MiB)
    assert slot is not None
    slot[:] = b"x" * (4 * MiB)
    assert "hg" not in _mapping(slot)["VmFlags"].split()


def test_pretouch_of_a_closed_pool_touches_nothing() -> None:
    pool = ChunkBuffers(MiB, 4)
    pool.close()
    assert pool.pretouch() == 0


_LIBC = ctypes.CDLL(None, use_errno=True)


def _resident(view: memoryview) -> int:
    """Bytes of ``view`` (page-aligned) that are in memory, from ``mincore(2)``. The RSS
    of the mapping in ``/proc/self/smaps`` cannot say this: the kernel merges an anonymous
    mapping with a neighbour that has the same flags (a Python arena, another pool), and
    that neighbour's resident pages count in the merged mapping's RSS until an
    ``madvise`` splits them apart."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    assert address % mmap.PAGESIZE == 0
    pages = -(-len(view) // mmap.PAGESIZE)
    vector = (ctypes.c_ubyte * pages)()
    if _LIBC.mincore(ctypes.c_void_p(address), ctypes.c_size_t(len(view)), vector) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(b & 1 for b in vector) * mmap.PAGESIZE


def _mapping(view: memoryview) -> dict[str, str]:
    """The ``/proc/self/smaps`` fields of the mapping that holds ``view``, as written."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    fields: dict[str, str] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if not head.endswith(":"):  # a mapping's first line: its address range first
            start, end = (int(x, 16) for x in head.split("-"))
            if inside:
                break
            inside = start <= address < end
        elif inside:
            name, value = line.split(":", 1)
            fields[name] = value.strip()
    assert fields, f"no mapping holds {address:#x}"
    return fields
