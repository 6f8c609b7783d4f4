"""Chunks that ``warm`` loaded for a read stream that has not opened yet.

The broker's reader continues a partition's read-ahead window into the segments after the
one being read (``warm``), so by the time the reader enters the next segment most of its
chunks were fetched by warming, not by a stream of that segment. Dropped into the chunk cache
on landing, every one of them would be read back from there: with the disk cache, a write
and then a read of the whole chunk (the ``O_DIRECT`` write leaves nothing in the page cache),
which is CPU and latency the stream's own read-ahead chunks, served from memory, do not
pay. So a warmed chunk is also kept in memory, holding its size from the read-ahead budget
(the plugin's warm account), until the stream that reaches it takes it. The chunk cache
still gets it (written behind, as any read-ahead chunk) for other readers.

A warmed chunk that no stream takes within ``idle_s`` is dropped from memory (it stays in
the chunk cache) at the next ``add`` or ``take``, so a consumer that stops leaves at most
one window held until the partition's or any other partition's next cold read. One owner:
the plugin, which closes it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future

from tierlog.storage.objectstore.budget import Account

__all__ = ["WarmedChunks"]

Chunk = bytes | memoryview
ChunkKey = tuple[str, int]


class WarmedChunks:
    """Warm loads by chunk key, each holding its size from ``account`` until taken,
    expired or closed. Thread-safe: warm calls add, read-ahead tasks and readers take."""

    def __init__(
        self, account: Account, idle_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._account = account
        self._idle_s = idle_s
        self._clock = clock
        self._lock = threading.Lock()
        self._loads: OrderedDict[ChunkKey, tuple[Future[Chunk | None], int, float]] = OrderedDict()
        self._closed = False

    def __contains__(self, key: ChunkKey) -> bool:
        with self._lock:
            return key in self._loads

    def __len__(self) -> int:
        with self._lock:
            return len(self._loads)

    def add(self, key: ChunkKey, load: Future[Chunk | None], size: int) -> None:
        """A warm load of ``key`` was submitted; it holds ``size`` from the account (already
        acquired) until a stream takes it. The load's result is the chunk, None if it
        failed."""
        with self._lock:
            closed = self._closed
            if not closed:
                self._loads[key] = (load, size, self._clock())
            expired = self._expire()
        if closed:
            load.cancel()
            self._account.release(size)
        for size_expired in expired:
            self._account.release(size_expired)

    def take(self, key: ChunkKey) -> Chunk | None:
        """The warmed chunk for the stream that reached it, waiting for its load if it is
        still in flight (never a second GET for it); None when it was not warmed, its load
        failed or had not started (then cancelled): the caller loads it itself."""
        with self._lock:
            entry = self._loads.pop(key, None)
            expired = self._expire()
        for size_expired in expired:
            self._account.release(size_expired)
        if entry is None:
            return None
        load, size, _at = entry
        try:
            if load.cancel():
                return None
            return load.result()
        except Exception:  # the caller loads it itself, and reports what fails then
            return None
        finally:
            self._account.release(size)

    def _expire(self) -> list[int]:
        """Drop the landed loads nobody took for ``idle_s``; their sizes, to release (the
        lock held; a handful of entries, at most the budget's chunks)."""
        now = self._clock()
        stale = [
            key
            for key, (load, _size, at) in self._loads.items()
            if load.done() and now - at > self._idle_s
        ]
        return [self._loads.pop(key)[1] for key in stale]

    def close(self) -> None:
        """Drop every warmed chunk and cancel the loads not started; nothing is kept after."""
        with self._lock:
            self._closed = True
            loads = list(self._loads.values())
            self._loads.clear()
        for load, size, _at in loads:
            load.cancel()
            self._account.release(size)
