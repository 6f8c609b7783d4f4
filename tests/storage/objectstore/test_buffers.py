"""The chunk GET buffer pool: a slot is reused only after every view of it is gone."""

from __future__ import annotations

import mmap

from tierlog.storage.objectstore.buffers import ChunkBuffers


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
