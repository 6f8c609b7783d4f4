"""The lazy read stream over a byte range of a remote segment.

Only the chunks covering the requested range are fetched, each with one ranged GET. The
reader loads the chunk it is in inline; read-ahead keeps ``read_ahead`` GETs of the
following chunks in flight on the read-ahead pool at all times: a GET that completes is
replaced at once, not when the reader gets to its chunk. By Little's law a reader with
``read_ahead`` chunks in flight gets at most ``read_ahead * chunk / GET time``; refilling
only as the reader advances would issue the window in bursts and leave it empty for as long
as the reader takes to consume a burst. How far ahead of the reader loaded chunks may pile
up is bounded (``run_ahead`` chunks past the reader's, twice the window by default), so a
reader that stops keeps a bounded amount loaded for it.

A read-ahead task that has not started when the reader needs its chunk is cancelled and the
chunk is loaded inline, so queueing never delays a reader and no chunk is fetched twice.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future

from tierlog.storage.objectstore.chunk_index import ChunkIndex

_Ahead = Future[bytes | memoryview | None]


class ChunkStream(io.RawIOBase):
    def __init__(
        self,
        chunk_index: ChunkIndex,
        start: int,
        end_inclusive: int,
        *,
        load: Callable[[int], bytes | memoryview],
        ahead: Callable[[int], bytes | memoryview | None],
        pool: Executor | None,
        read_ahead: int,
        run_ahead: int | None = None,
    ) -> None:
        super().__init__()
        chunks = chunk_index.chunks_for_range(start, end_inclusive)
        self._next_chunk = chunks.start
        self._last_chunk = chunks.stop - 1
        self._skip = start - chunk_index.original_range(chunks.start)[0]
        self._remaining = end_inclusive - start + 1
        self._load = load
        self._ahead = ahead
        self._pool = pool
        self._read_ahead = read_ahead if pool is not None else 0
        self._run_ahead = max(
            self._read_ahead, 2 * self._read_ahead if run_ahead is None else run_ahead
        )
        # read-ahead state, shared with the pool threads whose completions refill the window
        self._lock = threading.RLock()  # a done callback may run inside _fill (already done)
        self._pending: dict[int, _Ahead] = {}
        self._in_flight = 0
        self._current = chunks.start - 1  # the chunk the reader is in
        self._scheduled_to = chunks.start  # first chunk not yet handed to read-ahead
        self._stopped = False
        self._buf = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._remaining == 0 or len(view) == 0:
            return 0
        if not self._buf:
            self._advance()
        n = min(len(view), len(self._buf))
        view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._remaining -= n
        return n

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes] = []
        wanted = min(size, self._remaining)
        while wanted > 0 and self._remaining > 0:
            if not self._buf:
                self._advance()
            n = min(wanted, len(self._buf))
            parts.append(bytes(self._buf[:n]))
            self._buf = self._buf[n:]
            self._remaining -= n
            wanted -= n
        return b"".join(parts)

    def readall(self) -> bytes:
        return self.read(self._remaining)

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            pending = list(self._pending.values())
            self._pending.clear()
        for future in pending:
            future.cancel()
        self._buf = memoryview(b"")
        super().close()

    def _advance(self) -> None:
        if self._next_chunk > self._last_chunk:
            raise EOFError("chunk stream exhausted before its declared length")
        chunk_id = self._next_chunk
        self._next_chunk += 1
        with self._lock:
            self._current = chunk_id
            self._scheduled_to = max(self._scheduled_to, chunk_id + 1)
            future = self._pending.pop(chunk_id, None)
            self._fill()
        data = self._take(chunk_id, future)
        view = memoryview(data)
        if self._skip:
            view = view[self._skip :]
            self._skip = 0
        self._buf = view[: self._remaining]

    def _take(self, chunk_id: int, future: _Ahead | None) -> bytes | memoryview:
        if future is not None and not future.cancel():
            data = future.result()
            if data is not None:
                return data
        return self._load(chunk_id)

    def _fill(self) -> None:
        """Hand chunks to read-ahead until ``read_ahead`` are in flight or the run-ahead
        bound is reached; called with the lock held."""
        if self._pool is None or self._read_ahead <= 0 or self._stopped:
            return
        limit = min(self._last_chunk, self._current + self._run_ahead)
        while self._in_flight < self._read_ahead and self._scheduled_to <= limit:
            chunk_id = self._scheduled_to
            try:
                future = self._pool.submit(self._ahead, chunk_id)
            except RuntimeError:  # the pool is shut down: the plugin is closing
                self._stopped = True
                return
            self._scheduled_to += 1
            self._in_flight += 1
            self._pending[chunk_id] = future
            future.add_done_callback(self._landed)

    def _landed(self, _future: _Ahead) -> None:
        with self._lock:
            self._in_flight -= 1
            self._fill()
