"""Remote index views cost what they hold: small files in bytes, large ones mapped."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from tierlog.tiered.manager.index_files import MMAP_MIN_BYTES, OffsetIndexView


def _offset_index(path: Path, entries: int) -> Path:
    path.write_bytes(b"".join(struct.pack(">ii", i + 1, 100 * (i + 1)) for i in range(entries)))
    return path


def test_a_small_index_is_held_in_bytes_and_costs_its_size(tmp_path: Path) -> None:
    view = OffsetIndexView(_offset_index(tmp_path / "a.index", 40), base_offset=1000)
    assert not isinstance(view._buf, mmap.mmap)
    assert view.memory_bytes == view.size_bytes == 320
    assert view.lookup(1000 + 7) == 700
    view.close()
    assert view.entries == 0


def test_a_large_index_is_mapped_and_costs_whole_pages(tmp_path: Path) -> None:
    n = MMAP_MIN_BYTES // 8 + 3
    view = OffsetIndexView(_offset_index(tmp_path / "b.index", n), base_offset=0)
    assert isinstance(view._buf, mmap.mmap)
    assert view.size_bytes == n * 8
    assert view.memory_bytes % mmap.PAGESIZE == 0 and view.memory_bytes >= view.size_bytes
    assert view.lookup(n) == 100 * n
    view.close()
