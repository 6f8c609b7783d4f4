"""The lazy read stream over a byte range of a remote segment.

Only the chunks covering the requested range are fetched, each with one ranged GET, and
only as the reader gets to them; up to ``read_ahead`` following chunks are loaded in
parallel on the fetch pool while the reader consumes the current one. A read-ahead task
that has not started when the reader needs its chunk is cancelled and the chunk is loaded
inline, so queueing never delays a reader and no chunk is fetched twice.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future

from tierlog.storage.objectstore.chunk_index import ChunkIndex


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
        self._pending: deque[tuple[int, Future[bytes | memoryview | None]]] = deque()
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
        for _, future in self._pending:
            future.cancel()
        self._pending.clear()
        self._buf = memoryview(b"")
        super().close()

    def _advance(self) -> None:
        if self._next_chunk > self._last_chunk:
            raise EOFError("chunk stream exhausted before its declared length")
        chunk_id = self._next_chunk
        self._next_chunk += 1
        self._schedule_ahead(chunk_id)
        data = self._take(chunk_id)
        view = memoryview(data)
        if self._skip:
            view = view[self._skip :]
            self._skip = 0
        self._buf = view[: self._remaining]

    def _take(self, chunk_id: int) -> bytes | memoryview:
        if self._pending and self._pending[0][0] == chunk_id:
            _, future = self._pending.popleft()
            if not future.cancel():
                data = future.result()
                if data is not None:
                    return data
        return self._load(chunk_id)

    def _schedule_ahead(self, current: int) -> None:
        """Keep chunks current+1 .. current+read_ahead submitted."""
        if self._pool is None or self._read_ahead <= 0:
            return
        following = self._pending[-1][0] + 1 if self._pending else current + 1
        limit = min(current + self._read_ahead, self._last_chunk)
        while following <= limit:
            self._pending.append((following, self._pool.submit(self._ahead, following)))
            following += 1
