"""Sealed indexes copied from elsewhere (the remote tier's, cached on local disk): opened
read-only, checked entry by entry, and costing what they hold (small files in bytes, large
ones mapped)."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

import pytest

from tierlog.log.index import (
    FREEZE_MAX_BYTES,
    CorruptIndexError,
    OffsetIndex,
    TimeIndex,
    readable_offset_entries,
)
from tierlog.log.txn_index import AbortedTxn, load_sealed_aborted_txns


def _offset_index(path: Path, entries: int) -> Path:
    path.write_bytes(b"".join(struct.pack(">ii", i + 1, 100 * (i + 1)) for i in range(entries)))
    return path


def test_a_small_index_is_held_in_bytes_and_costs_its_size(tmp_path: Path) -> None:
    view = OffsetIndex.load_sealed(_offset_index(tmp_path / "a.index", 40), base_offset=1000)
    assert view._mmap is None
    assert view.memory_bytes == view.size_in_bytes == 320
    assert view.lookup(1000 + 7).position == 700
    view.close()
    assert view.entries == 0


def test_a_large_index_is_mapped_and_costs_whole_pages(tmp_path: Path) -> None:
    n = FREEZE_MAX_BYTES // 8 + 3
    view = OffsetIndex.load_sealed(_offset_index(tmp_path / "b.index", n), base_offset=0)
    assert isinstance(view._mmap, mmap.mmap)
    assert view.size_in_bytes == n * 8
    assert view.memory_bytes % mmap.PAGESIZE == 0 and view.memory_bytes >= view.size_in_bytes
    assert view.lookup(n).position == 100 * n
    view.close()


def test_trailing_zero_entries_are_padding(tmp_path: Path) -> None:
    path = _offset_index(tmp_path / "c.index", 3)
    path.write_bytes(path.read_bytes() + bytes(8 * 5))
    view = OffsetIndex.load_sealed(path, base_offset=0)
    assert view.entries == 3
    view.close()


@pytest.mark.parametrize(
    ("cls", "data"),
    [
        (OffsetIndex, struct.pack(">ii", 1, 100) + b"\0\0\0"),  # not whole entries
        (OffsetIndex, struct.pack(">ii", 2, 100) + struct.pack(">ii", 1, 200)),
        (OffsetIndex, struct.pack(">ii", 1, -100)),  # a negative position
        (TimeIndex, struct.pack(">qi", 5, 10) + struct.pack(">qi", 1, 20)),
        (TimeIndex, struct.pack(">qi", 5, 10) + struct.pack(">qi", 6, 9)),
    ],
)
def test_an_index_out_of_order_is_corrupt(
    tmp_path: Path, cls: type[OffsetIndex] | type[TimeIndex], data: bytes
) -> None:
    path = tmp_path / "d.index"
    path.write_bytes(data)
    with pytest.raises(CorruptIndexError):
        cls.load_sealed(path, base_offset=0)


def test_a_sealed_txn_index_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "e.txnindex"
    good = AbortedTxn(7, 10, 20, 21)
    path.write_bytes(good.encode())
    assert load_sealed_aborted_txns(path) == [good]
    path.write_bytes(good.encode() + b"\0")
    with pytest.raises(CorruptIndexError):
        load_sealed_aborted_txns(path)
    path.write_bytes(AbortedTxn(7, 20, 10, 21).encode())
    with pytest.raises(CorruptIndexError):
        load_sealed_aborted_txns(path)


def test_readable_offset_entries_end_at_the_preallocated_zeros() -> None:
    data = struct.pack(">6I", 0, 0, 5, 100, 9, 300) + bytes(16) + b"\x01\x02\x03"
    assert readable_offset_entries(data, 1000) == [(1000, 0), (1005, 100), (1009, 300)]
    assert readable_offset_entries(b"", 0) == []
    assert readable_offset_entries(bytes(16), 7) == [(7, 0)]


def test_readable_offset_entries_stop_at_an_entry_that_goes_backwards() -> None:
    data = struct.pack(">6I", 0, 0, 5, 100, 4, 200)
    assert readable_offset_entries(data, 0) == [(0, 0), (5, 100)]
