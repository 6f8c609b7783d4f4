"""Streams over remote segments that outlive one Fetch: a cursor, and the parked set.

A consumer reading sequentially asks for the offset where its previous Fetch stopped. The
reader parks the stream it used there, keyed by (partition, next offset), so the next Fetch
continues it: no new stream, no index lookup, no chunk looked up and mapped again, and the
plugin's read-ahead keeps running. Parked cursors are bounded in number and idle time (each
holds its carry, under one batch, and the plugin stream's current chunk), belong to one
``RemoteReader`` and are closed with it.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections import OrderedDict
from typing import BinaryIO

from tierlog.tiered.api import RemoteLogSegmentMetadata, SupportsReadView, TopicIdPartition

__all__ = ["PARKED_IDLE_S", "PARKED_MAX", "ParkedCursors", "SegmentCursor"]

log = logging.getLogger(__name__)

#: Cursors kept parked at once, per reader; the least recently parked goes first.
PARKED_MAX = 16
#: A cursor parked longer than this is closed instead of continued.
PARKED_IDLE_S = 30.0


class SegmentCursor:
    """A plugin stream over one remote segment, at a batch boundary, plus the bytes already
    read from it but not yet served (``carry``)."""

    __slots__ = ("carry", "md", "position", "stream", "used_at")

    def __init__(self, md: RemoteLogSegmentMetadata, stream: BinaryIO, position: int) -> None:
        self.md = md
        self.stream = stream
        self.position = position  # segment position of the first unserved byte
        self.carry: memoryview = memoryview(b"")
        self.used_at = 0.0

    def read(self, n: int) -> memoryview:
        """The next ``n`` bytes as one buffer (fewer only where the stream ends), consumed,
        that the Fetch response can send as is: the plugin's own chunk when the bytes lie
        within one and the stream lends it (``SupportsReadView``), else one copy."""
        if len(self.carry) >= n:
            out = self.carry[:n]
            self.carry = self.carry[n:]
        elif not self.carry and isinstance(self.stream, SupportsReadView):
            out = self.stream.read_view(n)
            if 0 < len(out) < n:  # the rest is in the next chunk: one buffer, one copy
                buf = memoryview(bytearray(n))
                buf[: len(out)] = out
                out = buf[: len(out) + self._fill(buf[len(out) :])]
        else:
            buf = memoryview(bytearray(n))
            got = len(self.carry)
            buf[:got] = self.carry
            self.carry = memoryview(b"")
            out = buf[: got + self._fill(buf[got:])]
        self.position += len(out)
        return out

    def _fill(self, buf: memoryview) -> int:
        """Bytes read from the stream into ``buf``: all of it unless the stream ends."""
        stream = self.stream
        readinto = (
            stream.readinto if isinstance(stream, (io.RawIOBase, io.BufferedIOBase)) else None
        )
        got = 0
        while got < len(buf):
            if readinto is not None:
                k = readinto(buf[got:]) or 0
            else:  # a plugin stream that only offers read()
                part = stream.read(len(buf) - got)
                k = len(part)
                buf[got : got + k] = part
            if not k:
                break
            got += k
        return got

    def unread(self, tail: memoryview) -> None:
        """Give back the end of what ``read`` returned, to be served first next time."""
        if not tail:
            return
        self.position -= len(tail)  # the carry already held is not counted in position
        if self.carry:
            tail = memoryview(bytes(tail) + bytes(self.carry))
        elif 2 * len(tail) < len(memoryview(tail.obj)):  # do not pin a large buffer for a tail
            tail = memoryview(bytes(tail))
        self.carry = tail

    def close(self) -> None:
        try:
            self.stream.close()
        except Exception as e:  # closing only cancels read-ahead; nothing to report
            log.debug("closing a remote segment stream failed: %r", e)


class ParkedCursors:
    """Cursors left between Fetches, keyed by (partition, offset of the next batch).

    Thread-safe. A cursor is taken out to be used, so two concurrent reads never share one.
    After ``close`` nothing is kept: a cursor parked then is closed at once.
    """

    def __init__(self, max_parked: int = PARKED_MAX, idle_s: float = PARKED_IDLE_S) -> None:
        self._max = max_parked
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._parked: OrderedDict[tuple[TopicIdPartition, int], SegmentCursor] = OrderedDict()
        self._closed = False

    def take(
        self, tip: TopicIdPartition, md: RemoteLogSegmentMetadata, offset: int
    ) -> SegmentCursor | None:
        """The cursor a previous read left at ``offset`` of this very segment; None if none."""
        with self._lock:
            cursor = self._parked.pop((tip, offset), None)
        if cursor is None:
            return None
        if (
            cursor.md.remote_log_segment_id == md.remote_log_segment_id
            and time.monotonic() - cursor.used_at <= self._idle_s
        ):
            return cursor
        cursor.close()
        return None

    def park(self, cursor: SegmentCursor, tip: TopicIdPartition, next_offset: int) -> None:
        now = time.monotonic()
        cursor.used_at = now
        dropped: list[SegmentCursor] = []
        with self._lock:
            if self._closed:
                dropped.append(cursor)
            else:
                old = self._parked.pop((tip, next_offset), None)
                if old is not None:
                    dropped.append(old)
                self._parked[(tip, next_offset)] = cursor
                dropped += self._evict(now)
        for c in dropped:
            c.close()

    def _evict(self, now: float) -> list[SegmentCursor]:
        """Remove the cursors over the bound or idle too long (the lock held)."""
        dropped: list[SegmentCursor] = []
        while len(self._parked) > self._max:
            dropped.append(self._parked.popitem(last=False)[1])
        while self._parked:
            key, oldest = next(iter(self._parked.items()))
            if now - oldest.used_at <= self._idle_s:
                break
            del self._parked[key]
            dropped.append(oldest)
        return dropped

    def cursors(self) -> list[SegmentCursor]:
        """The cursors parked now, oldest first."""
        with self._lock:
            return list(self._parked.values())

    def clear(self) -> None:
        """Close every parked cursor."""
        with self._lock:
            dropped = list(self._parked.values())
            self._parked.clear()
        for c in dropped:
            c.close()

    def close(self) -> None:
        """Close every parked cursor, and any parked from now on."""
        with self._lock:
            self._closed = True
        self.clear()
