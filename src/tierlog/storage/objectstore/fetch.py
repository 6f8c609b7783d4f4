"""The lazy read stream over a byte range of a remote segment.

Only the chunks covering the requested range are fetched, each with one ranged GET. The
reader loads the chunk it is in inline; read-ahead keeps the chunks after it loaded or in
flight on the read-ahead pool (``nearest_first``: ranked by how far past the reader each chunk
is), as many as the stream's adaptive window allows
(``window.WindowLaw``: it grows while the reader waits and throughput still grows, and
shrinks to what the consumer drains per GET when the consumer is the slower one). A GET
that completes is replaced at once, not when the reader gets to its chunk. Every chunk
ahead holds its size from the broker-wide budget (``budget.ReadAheadBudget``) until the
reader reaches it; what the budget does not grant now is not issued now.

A loaded read-ahead chunk is kept by the stream and served from memory when the reader
gets there (the plugin also keeps it in its chunk cache for other readers); a stream that
stops holds less than one window. A read-ahead task that has not started when the reader
needs its chunk is cancelled and the chunk is loaded inline, so queueing never delays a
reader and no chunk is fetched twice.

A reader that has to wait for a chunk in its stream's first epoch has the window grown
there and then (``WindowLaw.waiting``), and ``grown`` is told, so that whoever continues the
window into the next segments need not wait for the read to end.

A stream's read-ahead starts once its reader has its first chunk, not while that chunk is
still on its way: the first bytes of a read are what its caller waits for, and GETs issued
beside that one share the store, the network and the CPU with it. A stream entering a
segment that was warmed finds its first chunk cached, so nothing waits for that.

A stream whose first chunk is neither cached nor loaded ahead takes it from a GET that
announces its bytes as they are received (``arriving.Arriving``): the plugin's early GET of
chunk 0 on a segment's first touch, or one the plugin starts for it then. The stream serves
those bytes as they come, so the first batch goes out before the rest of its chunk has
arrived. Once that GET ends, read-ahead starts as it would have, and when the reader runs
past what arrived the chunk itself is taken from that GET's load (or the ordinary way),
with its error reported if it failed.
"""

from __future__ import annotations

import functools
import io
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from tierlog.storage.objectstore import metrics
from tierlog.storage.objectstore.arriving import Arriving
from tierlog.storage.objectstore.budget import ReadAheadBudget
from tierlog.storage.objectstore.chunk_index import ChunkIndex
from tierlog.storage.objectstore.nearest_first import NearestFirstPool
from tierlog.storage.objectstore.window import WindowLaw
from tierlog.tiered.api import SupportsReadView

Chunk = bytes | memoryview
#: A read-ahead chunk and the time of the GET its task made, None when the task made none
#: (the chunk was cached, or another load of it was already in flight).
_Ahead = Future[tuple[Chunk, float | None]]


class ChunkStream(io.RawIOBase, SupportsReadView):
    def __init__(
        self,
        chunk_index: ChunkIndex,
        start: int,
        end_inclusive: int,
        *,
        load: Callable[[int], Chunk],
        ahead: Callable[[int], tuple[Chunk, bool]],
        pool: NearestFirstPool | None,
        arriving: Callable[[int], Arriving | None] | None = None,
        law: WindowLaw | None,
        budget: ReadAheadBudget | None = None,
        reached: Callable[[int], None] | None = None,
        grown: Callable[[], None] | None = None,
        closed: Callable[[WindowLaw], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        chunks = chunk_index.chunks_for_range(start, end_inclusive)
        self._index = chunk_index
        self._next_chunk = chunks.start
        self._first_chunk = chunks.start
        self._last_chunk = chunks.stop - 1
        self._skip = start - chunk_index.original_range(chunks.start)[0]
        self._remaining = end_inclusive - start + 1
        self._load = load
        self._ahead = ahead
        self._pool = pool
        self._law = law if pool is not None and law is not None and law.cap > 0 else None
        self._account = None if budget is None or self._law is None else budget.open(self.reclaim)
        self._reached = reached
        self._grown = grown
        self._closed_cb = closed
        self._clock = clock
        # read-ahead state, shared with the pool threads whose completions refill the window
        self._lock = threading.RLock()  # a done callback may run inside _fill (already done)
        self._pending: dict[int, _Ahead] = {}
        self._held: dict[int, int] = {}  # chunk -> bytes it holds from the budget
        self._current = chunks.start - 1  # the chunk the reader is in
        self._scheduled_to = chunks.start  # first chunk not yet handed to read-ahead
        self._stopped = False
        self._buf = memoryview(b"")
        # the chunk the reader is in while its GET is still receiving (see the module doc)
        self._early = arriving
        self._arriving: Arriving | None = None
        self._arriving_since = 0.0
        self._arriving_size = 0  # that chunk's size
        self._taken = 0  # bytes of that chunk handed to _buf so far
        self._window = 0
        if self._law is not None:
            self._window = self._law.window_bytes
            metrics.READ_AHEAD_STREAMS.inc()
            metrics.READ_AHEAD_WINDOW_BYTES.inc(self._window)

    @property
    def reader_chunk(self) -> int:
        """The chunk the reader is in (one before the first until it reads); read without
        the lock by the GET pool's ranks, for which a value one advance old does."""
        return self._current

    @property
    def chunks_left(self) -> int:
        """Chunks of this stream past the reader's chunk."""
        return self._last_chunk - self._current

    @property
    def window_bytes(self) -> int:
        """The stream's read-ahead window now (0 without read-ahead)."""
        return 0 if self._law is None else self._law.window_bytes

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._remaining == 0 or len(view) == 0:
            return 0
        if not self._buf:
            self._more()
        n = min(len(view), len(self._buf))
        view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._remaining -= n
        return n

    def read_view(self, n: int) -> memoryview:
        """Up to ``n`` bytes of the chunk the reader is in, as a view of the chunk itself
        (the client's receive buffer, a cache mapping, or a decoded chunk): a Fetch
        response can send it as is."""
        if self._remaining == 0 or n <= 0:
            return memoryview(b"")
        if not self._buf:
            self._more()
        k = min(n, len(self._buf))
        view = self._buf[:k]
        self._buf = self._buf[k:]
        self._remaining -= k
        return view.toreadonly()

    def read_view_now(self, n: int) -> memoryview | None:
        """``read_view`` when the bytes are in memory already: the rest of the current
        chunk, or the next chunk once its read-ahead has landed (taking it then costs a
        lock and the window's bookkeeping, no I/O). None while that GET is in flight, was
        never started, or failed (``read_view`` then waits, or reports the failure)."""
        if self._remaining == 0 or n <= 0:
            return memoryview(b"")
        if not self._buf and self._arriving is not None:
            self._from_arriving(block=False)
            return self.read_view(n) if self._buf else None
        if not self._buf:
            if self._next_chunk > self._last_chunk:
                return None
            with self._lock:
                future = self._pending.get(self._next_chunk)
            if future is None or not future.done() or future.cancelled():
                return None
            if future.exception() is not None:
                return None
        return self.read_view(n)

    def when_readable(self, callback: Callable[[], None]) -> bool:
        """``callback`` once the next chunk's read-ahead GET ends, if the reader is at the
        end of its chunk and that GET is in flight; else False (nothing is loading it, it
        already ended, or the chunk the reader is in is still arriving)."""
        if self._remaining == 0 or self._buf or self._arriving is not None:
            return False
        if self._next_chunk > self._last_chunk:
            return False
        with self._lock:
            future = self._pending.get(self._next_chunk)
        if future is None or future.done():
            return False
        future.add_done_callback(lambda _future: callback())
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes] = []
        wanted = min(size, self._remaining)
        while wanted > 0 and self._remaining > 0:
            if not self._buf:
                self._more()
            n = min(wanted, len(self._buf))
            parts.append(bytes(self._buf[:n]))
            self._buf = self._buf[n:]
            self._remaining -= n
            wanted -= n
        return b"".join(parts)

    def readall(self) -> bytes:
        return self.read(self._remaining)

    def close(self) -> None:
        if self.closed:
            return
        with self._lock:
            self._stopped = True
            pending = list(self._pending.values())
            self._pending.clear()
            self._held.clear()
        for future in pending:
            future.cancel()
        if self._account is not None:
            self._account.close()
        if self._law is not None:
            metrics.READ_AHEAD_STREAMS.dec()
            metrics.READ_AHEAD_WINDOW_BYTES.dec(self._window)
            if self._closed_cb is not None:
                self._closed_cb(self._law)
        self._buf = memoryview(b"")
        self._arriving = None
        super().close()

    def reclaim(self) -> None:
        """The budget took this idle stream's holding back: drop the chunks loaded ahead
        (they stay in the plugin's chunk cache) and start again from the reader's chunk."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._held.clear()
            self._scheduled_to = self._current + 1
        for future in pending:
            future.cancel()

    def _more(self) -> None:
        """Make ``_buf`` hold the next bytes: more of the chunk still arriving (waiting for
        them), else the next chunk. Leaves it empty only where an ordinary chunk is."""
        while not self._buf and self._remaining > 0:
            if self._arriving is not None:
                self._from_arriving(block=True)
                continue
            self._advance()
            if self._arriving is None:
                return

    def _from_arriving(self, *, block: bool) -> None:
        """``_buf`` from the arriving chunk: the bytes received past those already taken
        (waiting for some if ``block``). Once its GET has ended with nothing more received,
        the chunk is taken from the load that GET was for (``Arriving.outcome``), or else
        the ordinary way (``_load``: from the early GET's result, or a GET of its own if
        that one failed), and the rest served from it."""
        arriving = self._arriving
        assert arriving is not None
        started = self._clock()
        left = self._arriving_size - self._taken  # the GET may reach past the chunk
        view = memoryview(b"")
        if left > 0:
            view = (arriving.wait(self._taken) if block else arriving.now(self._taken))[:left]
        if view:
            if block:
                metrics.READ_WAIT_SECONDS.inc(self._clock() - started)
            self._taken += len(view)
            self._serve(view)
            return
        if not block:
            return
        self._arriving = None
        outcome = arriving.outcome
        if outcome is not None and not outcome.cancelled():
            data = outcome.result()  # the load's error is the read's, as inline
        else:
            data = self._take(self._current, None)
        metrics.READ_WAIT_SECONDS.inc(self._clock() - started)
        self._serve(memoryview(data)[self._taken :])

    def _arrival_ended(self) -> None:
        """The arriving chunk's GET ended: what ``_advance`` does once a chunk is loaded."""
        if self._law is None:
            return
        now = self._clock()
        with self._lock:
            if self._stopped:
                return
            self._law.advanced(now, now - self._arriving_since)
            self._trim()
            self._fill()
            self._window_changed()

    def _serve(self, view: memoryview) -> None:
        """``_buf`` from bytes of the reader's chunk, after the part the stream skips."""
        if self._skip:
            drop = min(self._skip, len(view))
            view = view[drop:]
            self._skip -= drop
        self._buf = view[: self._remaining]

    def _window_changed(self) -> None:
        """The window metric follows the law; called with the lock held."""
        assert self._law is not None
        window = self._law.window_bytes
        if window != self._window:
            metrics.READ_AHEAD_WINDOW_BYTES.inc(window - self._window)
            self._window = window

    def _advance(self) -> None:
        if self._next_chunk > self._last_chunk:
            raise EOFError("chunk stream exhausted before its declared length")
        chunk_id = self._next_chunk
        self._next_chunk += 1
        with self._lock:
            first = self._scheduled_to == chunk_id
            self._current = chunk_id
            self._scheduled_to = max(self._scheduled_to, chunk_id + 1)
            future = self._pending.pop(chunk_id, None)
            held = self._held.pop(chunk_id, 0)
            if self._account is not None:
                if held:
                    self._account.release(held)
                self._account.touch()
            if not first:
                self._fill()
        started = self._clock()
        arriving = (
            self._early(chunk_id)
            if future is None and self._early is not None and chunk_id == self._first_chunk
            else None
        )
        if arriving is not None:
            self._arriving = arriving
            self._arriving_since = started
            self._taken = 0
            low, high = self._index.original_range(chunk_id)
            self._arriving_size = high - low
            arriving.when_ended(self._arrival_ended)
            return
        if future is not None and self._law is not None and not future.done():
            with self._lock:
                before = self._law.ahead
                self._law.waiting()
                self._fill()
                self._window_changed()
                grew = self._law.ahead > before
            if grew and self._grown is not None:
                self._grown()
        data = self._take(chunk_id, future)
        now = self._clock()
        metrics.READ_WAIT_SECONDS.inc(now - started)
        if self._law is not None:
            with self._lock:
                self._law.advanced(now, now - started)
                self._trim()
                self._fill()
                self._window_changed()
        self._serve(memoryview(data))

    def _take(self, chunk_id: int, future: _Ahead | None) -> Chunk:
        if future is not None and not future.cancel():
            try:
                data, _seconds = future.result()
            except Exception:  # a failed read-ahead: load inline and report from there
                return self._load(chunk_id)
            if self._reached is not None:
                self._reached(chunk_id)
            return data
        return self._load(chunk_id)

    def _fill(self) -> None:
        """Hand chunks to read-ahead until the window past the reader's chunk is covered
        or the budget grants no more; called with the lock held."""
        if self._law is None or self._stopped:
            return
        assert self._pool is not None
        limit = min(self._last_chunk, self._current + self._law.ahead)
        while self._scheduled_to <= limit:
            chunk_id = self._scheduled_to
            start, end = self._index.original_range(chunk_id)
            size = end - start
            if self._account is not None and not self._account.try_acquire(size):
                return
            try:
                future = self._pool.submit_ranked(
                    functools.partial(self._rank, chunk_id), self._timed, chunk_id
                )
            except RuntimeError:  # the pool is shut down: the plugin is closing
                if self._account is not None:
                    self._account.release(size)
                self._stopped = True
                return
            self._scheduled_to += 1
            self._held[chunk_id] = size
            self._pending[chunk_id] = future
            future.add_done_callback(self._landed)

    def _rank(self, chunk_id: int) -> int:
        """Chunks the reader has to consume before it needs ``chunk_id`` (the GET pool's
        order)."""
        return chunk_id - self._current

    def _trim(self) -> None:
        """After the window shrank: take back the chunks past it whose GETs have not
        started (from the far end), so a reader that stops then leaves less unread;
        called with the lock held."""
        assert self._law is not None
        limit = self._current + self._law.ahead
        while self._scheduled_to - 1 > limit:
            chunk_id = self._scheduled_to - 1
            future = self._pending.get(chunk_id)
            if future is None or not future.cancel():
                return
            del self._pending[chunk_id]
            held = self._held.pop(chunk_id, 0)
            if held and self._account is not None:
                self._account.release(held)
            self._scheduled_to = chunk_id

    def _timed(self, chunk_id: int) -> tuple[Chunk, float | None]:
        """The chunk, and how long its GET took if this task made one. A chunk found in the
        cache (warmed for the next segment) or joined in flight says nothing about the
        store's latency: counted as a GET it would pull ``L`` towards zero, and the law,
        seeing a consumer that needs almost no read-ahead, would shrink the window just as
        the reader reaches the chunks past the warmed ones."""
        started = self._clock()
        data, fetched = self._ahead(chunk_id)
        return data, (self._clock() - started) if fetched else None

    def _landed(self, future: _Ahead) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        with self._lock:
            seconds = future.result()[1]
            if self._law is not None and seconds is not None:
                self._law.got(seconds)
            self._fill()
