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
from collections.abc import Callable
from typing import BinaryIO

from tierlog.tiered.api import RemoteLogSegmentMetadata, SupportsReadView, TopicIdPartition

__all__ = ["PARKED_IDLE_S", "PARKED_MAX", "ParkedCursors", "SegmentCursor"]

log = logging.getLogger(__name__)

#: Cursors kept parked at once, per reader; the least recently parked goes first.
PARKED_MAX = 16
#: A cursor parked longer than this is closed instead of continued.
PARKED_IDLE_S = 30.0
#: ``read_view`` size that takes whatever is left of the plugin's current chunk.
_REST_OF_CHUNK = 1 << 62
#: The longest carry ``fill_now`` joins: the copy runs on the event loop, and a length
#: field beyond any real batch (damage) must not make it copy every landed chunk.
_JOIN_ON_LOOP_MAX = 8 << 20


class SegmentCursor:
    """A plugin stream over one remote segment, at a batch boundary, plus the bytes already
    read from it but not yet served (``carry``).

    With a stream that lends its buffer (``SupportsReadView``) the carry is the rest of the
    plugin's current chunk, taken whole and served from in slices: a read that lies within
    the chunk, the common case (a 1 MiB Fetch from a 4 MiB chunk), is a view of the chunk,
    and giving back the part of it the response could not use (``unread``) is a view too.
    Only what must be contiguous across a chunk boundary is copied, once, into a buffer of
    its own."""

    __slots__ = ("_joined", "_undo", "_undo_at", "carry", "md", "position", "stream", "used_at")

    def __init__(self, md: RemoteLogSegmentMetadata, stream: BinaryIO, position: int) -> None:
        self.md = md
        self.stream = stream
        self.position = position  # segment position of the first unserved byte
        self.carry: memoryview = memoryview(b"")
        self.used_at = 0.0
        # what the last read was sliced from: ``unread`` gives back a view of it
        self._undo: memoryview | None = None
        self._undo_at = 0
        self._joined = False  # the carry is a buffer of ours, not the plugin's chunk

    def read(self, n: int, need: int | None = None) -> memoryview:
        """The next ``n`` bytes as one buffer (fewer only where the stream ends), consumed,
        that the Fetch response can send as is: the plugin's own chunk when the bytes lie
        within one and the stream lends it (``SupportsReadView``), else one copy.

        With ``need``, a lending stream's read may stop at the end of its chunk, returning
        fewer than ``n`` bytes but at least ``need``: only bytes that must be contiguous and
        span a chunk boundary (the batch across it) are copied, and the read after that one
        is a view of the next chunk again."""
        if len(self.carry) < n:
            stream = self.stream
            lends = isinstance(stream, SupportsReadView)
            floor = n if need is None or not lends else min(need, n)
            if not self.carry and isinstance(stream, SupportsReadView):
                self.carry = stream.read_view(_REST_OF_CHUNK)  # the rest of the chunk
                self._joined = False
            if len(self.carry) < floor:
                self._join(floor)
        base = self.carry
        out = base[:n]
        self.carry = base[n:]
        self._undo, self._undo_at = base, len(out)
        self.position += len(out)
        return out

    def fill_now(self, n: int) -> bool:
        """Make the carry at least ``n`` bytes long without waiting for the store: from the
        rest of a lending stream's chunk, and across its boundary into the next chunk if
        that one has landed (``read_view_now``; the batch across the boundary is then
        joined, one copy, as ``read`` joins it). False if that needs a wait, the stream
        cannot tell, or the segment ends first; what was taken stays in the carry, so
        ``read`` continues from it."""
        if len(self.carry) >= n:
            return True
        stream = self.stream
        if not isinstance(stream, SupportsReadView):
            return False
        if n > _JOIN_ON_LOOP_MAX:  # a batch this large (or a damaged length) is read's
            return False
        if not self.carry:
            view = stream.read_view_now(_REST_OF_CHUNK)
            if not view:
                return False
            self.carry = view
            self._joined = False
            if len(view) >= n:
                return True
        parts = [self.carry]
        have = len(self.carry)
        while have < n:
            view = stream.read_view_now(n - have)
            if not view:
                break
            parts.append(view)
            have += len(view)
        if len(parts) > 1:
            # bytes.join sizes the result once and copies each part once (a bytearray
            # would be zero-filled first)
            self.carry = memoryview(b"".join(parts))
            self._joined = True
        return have >= n

    def when_readable(self, callback: Callable[[], None]) -> bool:
        """``callback`` once the load a failed ``fill_now`` waited for ends, if the stream
        can arrange it (``SupportsReadView.when_readable``)."""
        stream = self.stream
        return isinstance(stream, SupportsReadView) and stream.when_readable(callback)

    def _join(self, n: int) -> None:
        """Make the carry ``n`` bytes long (fewer only where the stream ends) in a buffer of
        its own: one copy, of what spans a chunk boundary or of a stream that lends nothing."""
        carry = self.carry
        buf = memoryview(bytearray(n))
        got = len(carry)
        buf[:got] = carry
        self.carry = buf[: got + self._fill(buf[got:])]
        self._joined = True

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
        """Give back the end of what the last ``read`` returned, to be served first next
        time."""
        if not tail:
            self._undo = None  # nothing to give back: do not keep the buffer it was cut from
            return
        k = len(tail)
        self.position -= k  # the carry already held is not counted in position
        if self._undo is not None and k <= self._undo_at:
            carry = self._undo[self._undo_at - k :]  # the tail, then the carry: a view
            self._undo = None
            if self._joined and 2 * len(carry) < memoryview(carry.obj).nbytes:
                carry = memoryview(bytes(carry))  # do not pin a large buffer for a tail
                self._joined = False
            self.carry = carry
            return
        if self.carry:
            tail = memoryview(bytes(tail) + bytes(self.carry))
        else:
            tail = memoryview(bytes(tail))
        self._joined = False
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
