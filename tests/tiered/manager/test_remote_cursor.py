"""A cursor over a stream that lends its chunks serves from them without copying: a read
within a chunk and the tail it gives back are views of the chunk, and only the bytes that
must be contiguous across a chunk boundary are copied (then the next read is a view of the
next chunk again, not a copy for every read after the first boundary)."""

from __future__ import annotations

import io
from typing import BinaryIO, cast

from tests.tiered.manager.rlm_helpers import seg
from tierlog.tiered.api import SupportsReadView
from tierlog.tiered.manager.remote_cursor import SegmentCursor


class _Chunk(bytes):
    """A chunk the test can recognise as the buffer behind a view."""


class _Lending(io.RawIOBase, SupportsReadView):
    """A plugin stream over fixed chunks that lends them (``read_view``)."""

    def __init__(self, chunks: list[bytes]) -> None:
        super().__init__()
        self.chunks = [_Chunk(c) for c in chunks]
        self._i = 0
        self._buf = memoryview(b"")

    def readable(self) -> bool:
        return True

    def _next(self) -> bool:
        if not self._buf:
            if self._i == len(self.chunks):
                return False
            self._buf = memoryview(self.chunks[self._i])
            self._i += 1
        return True

    def read_view(self, n: int) -> memoryview:
        if not self._next():
            return memoryview(b"")
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if not view or not self._next():
            return 0
        k = min(len(view), len(self._buf))
        view[:k] = self._buf[:k]
        self._buf = self._buf[k:]
        return k


def _cursor(chunks: list[bytes]) -> tuple[SegmentCursor, _Lending]:
    stream = _Lending(chunks)
    md = seg(0, 99, size=sum(map(len, chunks)))
    return SegmentCursor(md, cast(BinaryIO, stream), 0), stream


def test_reads_within_a_chunk_and_the_tail_given_back_are_views_of_it() -> None:
    cursor, stream = _cursor([bytes(range(100)), bytes(100)])
    first = cursor.read(30)
    assert first.obj is stream.chunks[0] and bytes(first) == bytes(range(30))
    cursor.unread(first[20:])  # the response used 20 bytes of the 30
    again = cursor.read(30, need=10)
    assert again.obj is stream.chunks[0] and bytes(again) == bytes(range(20, 50))
    assert cursor.position == 50


def test_only_the_bytes_across_a_chunk_boundary_are_copied() -> None:
    a, b = bytes(range(100)), bytes(range(100, 200))
    cursor, stream = _cursor([a, b])
    assert cursor.read(90).obj is stream.chunks[0]
    # 30 wanted, 20 needed (a batch): 10 from this chunk and 10 from the next, copied
    across = cursor.read(30, need=20)
    assert bytes(across) == (a + b)[90:110] and not isinstance(across.obj, _Chunk)
    cursor.unread(across[20:])  # nothing to give back past what was needed
    after = cursor.read(30, need=20)
    assert after.obj is stream.chunks[1] and bytes(after) == b[10:40]


def test_a_read_that_must_cross_a_boundary_still_gets_every_byte() -> None:
    a, b = bytes(range(50)), bytes(range(50, 120))
    cursor, _stream = _cursor([a, b])
    assert bytes(cursor.read(40)) == a[:40]
    whole = cursor.read(60)  # no ``need``: all 60 in one buffer
    assert bytes(whole) == (a + b)[40:100]
    assert bytes(cursor.read(100, need=1)) == (a + b)[100:]
    assert len(cursor.read(10)) == 0
