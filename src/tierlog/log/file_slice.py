"""A byte range of a segment's ``.log`` file that a Fetch answers with, unread.

Kafka answers a consumer from the page cache with ``sendfile(2)`` (``FileRecords.writeTo``):
the records never pass through the broker's memory. A hot Fetch here does the same: the log
returns a ``FileSlice`` (whole batches, their end found from the offset index and a few
batch headers) and the connection sends it with ``os.sendfile`` when the socket can take it
(``tierlog.server.reply_writer``), or reads it into memory when it cannot.

The slice names its segment, not a file descriptor: the descriptor is looked up when the
bytes are sent, so a segment closed in between (deleted, truncated away, swapped by the
cleaner) is seen as closed (``fd`` -1) rather than as whatever file reused the number.
Bytes a truncation removed in between are missing when sent; the connection is then closed,
as Kafka closes it when a ``FileRecords`` shrank under a send.
"""

from __future__ import annotations

import os
from typing import Protocol


class _OpenFile(Protocol):
    @property
    def fd(self) -> int:
        """The open ``.log`` file, or -1 once closed."""
        ...


class SliceUnavailable(OSError):
    """The slice's bytes can no longer be read whole: its segment was closed or truncated."""


class FileSlice:
    """``size`` bytes at ``position`` of a segment's ``.log`` file, ending after a whole
    batch; ``next_offset`` is the offset after its last batch."""

    __slots__ = ("_file", "next_offset", "position", "size")

    def __init__(self, file: _OpenFile, position: int, size: int, next_offset: int) -> None:
        self._file = file
        self.position = position
        self.size = size
        self.next_offset = next_offset

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice(position={self.position}, size={self.size})"

    @property
    def fd(self) -> int:
        """The file's descriptor now (-1 once its segment is closed)."""
        return self._file.fd

    def read(self, skip: int = 0) -> bytes:
        """The slice's bytes from ``skip`` on, read into memory; raises ``SliceUnavailable``
        when they cannot all be read."""
        want = self.size - skip
        fd = self.fd
        try:
            data = os.pread(fd, want, self.position + skip) if fd >= 0 else b""
        except OSError as e:
            raise SliceUnavailable(f"{self!r}: {e}") from e
        if len(data) != want:
            raise SliceUnavailable(f"{self!r}: {len(data)} of {want} bytes left in the file")
        return data

    def __bytes__(self) -> bytes:
        return self.read()
