"""Splitting a byte stream into Kafka frames (4-byte big-endian size prefix).

The splitter is fed whatever the transport delivers and hands back whole frames. It enforces
``socket.request.max.bytes`` on the *declared* size, before buffering the body, so a hostile
peer cannot make us allocate more than the limit: Kafka does the same check in its
``NetworkReceive`` and closes the connection.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The stream can no longer be trusted; the only safe reaction is closing the connection."""


class FrameSplitter:
    """Accumulates bytes and yields complete frames (without their size prefix).

    Frames are returned as read-only ``bytes`` because kio's native readers refuse writable
    buffers.
    """

    __slots__ = ("_buf", "_max_size")

    def __init__(self, max_size: int) -> None:
        self._buf = bytearray()
        self._max_size = max_size

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Append ``data`` and return every frame that is now complete.

        Raises ``FrameError`` for a negative size or one above the limit; the buffer is left
        as is because the caller is expected to drop the connection.
        """
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self._max_size:
                raise FrameError(
                    f"frame of {size} bytes exceeds socket.request.max.bytes={self._max_size}"
                )
            if end - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames


def frame(payload: bytes | bytearray) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + bytes(payload)


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
