"""A byte range of a segment's ``.log`` file that a Fetch answers with, unread.

Kafka answers a consumer from the page cache with ``sendfile(2)`` (``FileRecords.writeTo``):
the records never pass through the broker's memory. A hot Fetch here does the same: the log
returns a ``FileSlice`` (whole batches, their end found from the offset index and a few
batch headers) and the connection sends it with ``os.sendfile``
(``tierlog.server.reply_writer``).

A slice is sent after the read that made it, sometimes much later (the same Fetch's remote
reads, a client that reads slowly), and meanwhile retention may delete its segment. So the
descriptor is an ``OpenFile`` that the segment and each of its slices refer to, closed when
the last of them lets go: a deleted segment's slices are still sent whole (its file is
unlinked but open, as Kafka keeps it for ``file.delete.delay.ms``), and no slice can see
its descriptor's number reused by another file. Only a truncation takes bytes from under a
slice; they are then missing when it is sent, and the connection is closed, as Kafka closes
it when a ``FileRecords`` shrank during its send.
"""

from __future__ import annotations

import os


class OpenFile:
    """An open descriptor closed when the last object referring to it is gone.

    Its users (a segment, the slices of it in replies not yet sent) are not ordered: a
    segment may close before its slices are sent, or after. CPython frees an object when
    its last reference goes, so the descriptor closes at that moment, not at some later
    collection; a segment that closes with no slice outstanding closes it at once."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass  # nothing to recover; the descriptor is gone either way


class SliceUnavailable(OSError):
    """The slice's bytes can no longer be read whole: its segment was truncated."""


class FileSlice:
    """``size`` bytes at ``position`` of a segment's ``.log`` file, ending after a whole
    batch; ``next_offset`` is the offset after its last batch."""

    __slots__ = ("_file", "next_offset", "position", "size")

    def __init__(self, file: OpenFile, position: int, size: int, next_offset: int) -> None:
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
        """The file's descriptor, open as long as this slice exists."""
        return self._file.fd

    def read(self, skip: int = 0) -> bytes:
        """The slice's bytes from ``skip`` on, read into memory; raises ``SliceUnavailable``
        when they cannot all be read."""
        want = self.size - skip
        try:
            data = os.pread(self._file.fd, want, self.position + skip)
        except OSError as e:
            raise SliceUnavailable(f"{self!r}: {e}") from e
        if len(data) != want:
            raise SliceUnavailable(f"{self!r}: {len(data)} of {want} bytes left in the file")
        return data

    def __bytes__(self) -> bytes:
        return self.read()
