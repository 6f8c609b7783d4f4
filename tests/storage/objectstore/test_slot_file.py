"""The disk chunk cache's slot file: chunks written in place into the slots of one file,
and a slot never overwritten while a reader still maps the chunk it held."""

from __future__ import annotations

import errno
import gc
import mmap
import os
from pathlib import Path
from typing import Any

import pytest

from tierlog.storage.objectstore import slot_file
from tierlog.storage.objectstore.cache import SLOT_FILE_NAME, SPARE_SLOTS, disk_chunk_cache
from tierlog.storage.objectstore.slot_file import SlotFile

PAGE = mmap.PAGESIZE
CHUNK = 2 * PAGE


def _chunk(i: int, size: int = CHUNK) -> bytes:
    return bytes([i % 251]) * size


def _slot_file(cache: Any) -> SlotFile:
    """The slot file behind a disk chunk cache."""
    slots = cache._store._slots
    assert isinstance(slots, SlotFile)
    return slots


def _written(slots: SlotFile, data: bytes) -> slot_file.SlotHandle:
    index = slots.take()
    assert index is not None
    if slots.direct:
        buf = mmap.mmap(-1, slots.padded_length(len(data)))
        buf[: len(data)] = data
        return slots.write(index, memoryview(buf), len(data))
    return slots.write(index, data, len(data))


def test_chunks_go_to_the_slots_of_one_file_and_read_back(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    cache = disk_chunk_cache(directory, capacity_bytes=4 * CHUNK, ttl_seconds=60, chunk_size=CHUNK)
    for i in range(3):
        assert cache.get(("seg", i), lambda i=i: _chunk(i)) == _chunk(i)  # type: ignore[misc]
    # no file per chunk: one slot file, at most as large as the slots written
    assert [p.name for p in directory.iterdir()] == [SLOT_FILE_NAME]
    assert (directory / SLOT_FILE_NAME).stat().st_size <= 3 * CHUNK
    for i in range(3):
        hit = cache.get(("seg", i), lambda: b"never")
        assert isinstance(hit, memoryview) and bytes(hit) == _chunk(i)
    # a short last chunk of a segment reads back at its own length
    assert cache.get(("seg", 9), lambda: b"tail") == b"tail"
    assert bytes(cache.get(("seg", 9), lambda: b"never")) == b"tail"
    cache.close()


def test_a_reader_of_an_evicted_chunk_keeps_its_bytes_while_slots_are_reused(
    tmp_path: Path,
) -> None:
    """Eviction under a reader: its slot is not reused until the reader lets go, so the
    mapped bytes never turn into another chunk's."""
    cache = disk_chunk_cache(
        tmp_path / "cache", capacity_bytes=2 * CHUNK, ttl_seconds=60, chunk_size=CHUNK
    )
    cache.get(("seg", 0), lambda: _chunk(0))
    held = cache.get(("seg", 0), lambda: b"never")  # a mapping of chunk 0's slot
    assert isinstance(held, memoryview)
    cache.invalidate(("seg", 0))  # evicted under its reader
    for i in range(1, 12):  # every other slot is rewritten many times over
        cache.get(("seg", i), lambda i=i: _chunk(i))  # type: ignore[misc]
    assert bytes(held) == _chunk(0)
    pinned_free = _slot_file(cache).free
    del held
    gc.collect()
    assert _slot_file(cache).free == pinned_free + 1  # the slot is free once unmapped
    cache.close()


def test_a_handle_evicted_before_it_is_mapped_maps_nothing(tmp_path: Path) -> None:
    slots = SlotFile(tmp_path / "s", CHUNK, 2)
    old = _written(slots, _chunk(1))
    slots.release(old)
    new = _written(slots, _chunk(2))
    assert new.index == old.index  # last in, first out: the same slot, reused
    assert slots.map(old) is None  # a reader racing the eviction loads the chunk again
    view = slots.map(new)
    assert view is not None and bytes(view) == _chunk(2)
    slots.release(old)  # releasing a stale handle does not free the live entry's slot
    assert slots.map(new) is not None
    slots.close()
    assert slots.map(new) is None
    assert bytes(view) == _chunk(2)  # a mapping made before close stays readable


def test_chunks_that_do_not_fit_a_slot_or_find_none_free_get_files(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    cache = disk_chunk_cache(directory, capacity_bytes=16 * CHUNK, ttl_seconds=60, chunk_size=CHUNK)
    big = _chunk(7, CHUNK + 1)  # a segment uploaded with a larger chunk.size
    assert cache.get(("old", 0), lambda: big) == big
    files = [p for p in directory.iterdir() if p.name != SLOT_FILE_NAME]
    assert len(files) == 1 and files[0].read_bytes() == big
    assert bytes(cache.get(("old", 0), lambda: b"never")) == big
    # every slot still mapped by a reader of an evicted chunk: the next chunk is still
    # cached, in a file
    held = []
    for i in range(16 + SPARE_SLOTS):
        cache.get(("seg", i), lambda i=i: _chunk(i))  # type: ignore[misc]
        held.append(cache.get(("seg", i), lambda: b"never"))
        cache.invalidate(("seg", i))
    assert _slot_file(cache).free == 0
    assert cache.get(("seg", 100), lambda: _chunk(100)) == _chunk(100)
    assert len([p for p in directory.iterdir() if p.name != SLOT_FILE_NAME]) == 2
    assert bytes(cache.get(("seg", 100), lambda: b"never")) == _chunk(100)
    assert [bytes(v) for v in held] == [_chunk(i) for i in range(16 + SPARE_SLOTS)]
    cache.close()


def test_buffered_writes_where_o_direct_is_not_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slot_file, "_O_DIRECT", 0)
    cache = disk_chunk_cache(
        tmp_path / "cache", capacity_bytes=4 * CHUNK, ttl_seconds=60, chunk_size=CHUNK
    )
    assert not _slot_file(cache).direct
    data = _chunk(3, CHUNK - 17)  # not a whole number of pages
    assert cache.get(("seg", 0), lambda: data) == data
    assert bytes(cache.get(("seg", 0), lambda: b"never")) == data
    cache.close()


def test_a_failed_write_frees_its_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slots = SlotFile(tmp_path / "s", CHUNK, 1)

    def disk_full(*_: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", disk_full)
    with pytest.raises(OSError):
        _written(slots, _chunk(1))
    assert slots.free == 1
    monkeypatch.undo()
    handle = _written(slots, _chunk(2))
    view = slots.map(handle)
    assert view is not None and bytes(view) == _chunk(2)
    slots.close()


def test_a_disk_cache_that_cannot_write_a_slot_serves_the_chunk_uncached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = disk_chunk_cache(
        tmp_path / "cache", capacity_bytes=4 * CHUNK, ttl_seconds=60, chunk_size=CHUNK
    )

    def disk_full(*_: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", disk_full)
    assert cache.get(("seg", 0), lambda: _chunk(0)) == _chunk(0)
    assert cache.stats.store_failures == 1 and ("seg", 0) not in cache
    monkeypatch.undo()
    assert cache.get(("seg", 1), lambda: _chunk(1)) == _chunk(1)
    assert bytes(cache.get(("seg", 1), lambda: b"never")) == _chunk(1)
    cache.close()
