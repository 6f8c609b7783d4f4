"""One client connection: frames in, responses out, strictly in request order.

Kafka clients rely on responses arriving in request order, so a connection handles one
request at a time; a long-polling Fetch therefore delays only its own connection. Reading
is paused while requests are queued (bounded memory for a client that pipelines a lot) and
responses wait while the transport's write buffer is above its high-water mark (a slow
reader cannot make us buffer unbounded responses): the next request is not even handled
until the previous response has drained below the mark, so a connection holds at most one
response beyond the mark. A response with records in a log file is written by the
``ReplyWriter``, which waits for the socket itself and returns once all of it is sent.

A connection also knows how long it has been idle (``connections.max.idle.ms``): the loop
time of its last I/O progress is one ``IoProgress`` stamped when bytes arrive, when a
handler finishes, when the transport's buffer drops below its low-water mark
(``resume_writing``) and when the reply writer finds its full socket writable again.
Between those marks a reply drains without telling us: a full socket becomes writable
only once half of its send queue is gone, which a client reading slowly behind a 4 MiB
queue takes seconds to free, and the last bytes of a reply leave the kernel's queue after
the broker wrote them. So the broker's sweep also looks at the output still pending (the
transport's buffer, plus the kernel's send queue while a reply is being written and until
that queue is empty) and counts any decrease since its last look as progress. A
connection stalled behind a client that stopped reading is therefore idle, however much
it has queued for that client, and one whose client reads slowly is not.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import logging
import sys
import termios
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from tierlog.protocol.fetch_response import ResponsePart
from tierlog.protocol.framing import FrameError, FrameSplitter
from tierlog.server.connection_limits import ConnectionLimits
from tierlog.server.quotas.loop_time import LoopTimer
from tierlog.server.reply_writer import IoProgress, ReplyWriter, sendfile_socket
from tierlog.server.request_memory import UNBOUNDED, QueuedRequestBytes

log = logging.getLogger(__name__)

#: A handled request yields buffers to write (possibly none, for acks=0 Produce), or None
#: to close the connection.
Reply = Sequence[ResponsePart] | None
RequestHandler = Callable[[bytes, "ConnectionInfo"], Awaitable[Reply]]

_MAX_QUEUED_FRAMES = 32


ANONYMOUS = "ANONYMOUS"
"""The principal of a connection that did not authenticate (Kafka's ``User:ANONYMOUS``)."""


class ConnectionInfo:
    """What handlers know of the connection a request came on, and what they tell it back.

    ``principal`` is the user name client quotas are matched by: every connection is
    ``ANONYMOUS`` until authentication sets it. ``throttle_ms`` is set while a request is
    handled: after its response is written the connection reads nothing more for that long
    (KIP-219). ``timer`` measures the handler's time on the loop when a request quota is
    in force; a handler that charges it itself (Produce, Fetch) sets ``request_charged``,
    and one whose request no client quota applies to (a follower's Fetch) sets
    ``quota_exempt``.
    """

    __slots__ = (
        "client_id",
        "peer",
        "principal",
        "quota_exempt",
        "request_charged",
        "request_size",
        "throttle_ms",
        "timer",
    )

    def __init__(self, peer: str, principal: str = ANONYMOUS) -> None:
        self.peer = peer
        self.principal = principal
        self.client_id = ""
        self.request_size = 0
        self.throttle_ms = 0
        self.timer: LoopTimer | None = None
        self.request_charged = False
        self.quota_exempt = False

    def begin_request(self, client_id: str, size: int) -> None:
        self.client_id = client_id
        self.request_size = size
        self.throttle_ms = 0
        self.timer = None
        self.request_charged = False
        self.quota_exempt = False

    def throttle(self, ms: int) -> None:
        """Mute the connection for ``ms`` once this request's response is written."""
        self.throttle_ms = max(self.throttle_ms, ms)


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        handler: RequestHandler,
        max_frame_bytes: int,
        registry: set[KafkaConnection],
        writer: ReplyWriter,
        limits: ConnectionLimits | None = None,
        queued_bytes: QueuedRequestBytes = UNBOUNDED,
    ) -> None:
        self._handler = handler
        self._writer = writer
        self._sock_fd: int | None = None
        self._splitter = FrameSplitter(max_frame_bytes)
        self._queue: collections.deque[bytes] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._worker: asyncio.Task[None] | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._paused_for: set[str] = set()
        """Why reading is paused: a full queue, a quota's mute, the broker's queued bytes."""
        self._queued_bytes = queued_bytes
        self._registry = registry
        self._info = ConnectionInfo("?")
        self._closing = False
        self._progress = IoProgress(0.0)
        self._handling = False
        self._writing = False
        self._pending_at_last_look = 0
        self._limits = limits
        self._admitted_from: str | None = None
        self._muted = False

    # ---- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport
        self._transport = cast(asyncio.Transport, transport)
        self._sock_fd = sendfile_socket(transport)
        peer = transport.get_extra_info("peername")
        self._info = ConnectionInfo(f"{peer[0]}:{peer[1]}" if peer else "?")
        loop = asyncio.get_running_loop()
        if self._limits is None:
            self._serve()
            return
        address = str(peer[0]) if peer else "?"
        delay_ms = self._limits.accept_delay_ms(time.monotonic() * 1000)
        if delay_ms is None:
            self._closing = True
            self._transport.abort()
        elif delay_ms > 0:
            self._transport.pause_reading()
            loop.call_later(delay_ms / 1000, self._accept, address, True)
        else:
            self._accept(address, False)

    def _accept(self, address: str, held: bool) -> None:
        """The connection's turn at the acceptor (``max.connection.creation.rate``): the
        per-IP limits decide whether it is served."""
        transport = self._transport
        assert transport is not None and self._limits is not None
        if self._closing:
            return
        if not self._limits.admit(address):
            self._closing = True
            transport.abort()
            return
        self._admitted_from = address
        throttle_ms = self._limits.creation_throttle_ms(address)
        if throttle_ms > 0:
            self._closing = True
            transport.pause_reading()
            asyncio.get_running_loop().call_later(throttle_ms / 1000, transport.abort)
            return
        if held:
            transport.resume_reading()
        self._serve()

    def _serve(self) -> None:
        self._progress.at = asyncio.get_running_loop().time()
        self._registry.add(self)

    def data_received(self, data: bytes) -> None:
        self._progress.at = asyncio.get_running_loop().time()
        try:
            frames = self._splitter.feed(data)
        except FrameError as e:
            log.warning("closing connection from %s: %s", self._info.peer, e)
            self.abort()
            return
        if not frames:
            return
        self._queue.extend(frames)
        if len(self._queue) >= _MAX_QUEUED_FRAMES:
            self._pause("queue")
        queued = self._queued_bytes
        if queued.bounded and queued.add(sum(len(f) for f in frames)):
            self._pause("memory")
            queued.wait(self, self._memory_available)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._drain())

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._registry.discard(self)
        self._queued_bytes.forget(self)
        self._queued_bytes.remove(sum(len(f) for f in self._queue))
        self._queue.clear()
        if self._limits is not None and self._admitted_from is not None:
            self._limits.release(self._admitted_from)
            self._admitted_from = None
        self._writable.set()
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._progress.at = asyncio.get_running_loop().time()
        self._writable.set()

    # ---- request loop -------------------------------------------------------------------
    async def _drain(self) -> None:
        transport = self._transport
        assert transport is not None
        while self._queue and not self._closing:
            # Wait for the client to drain the previous response before building the next:
            # otherwise a reader that never drains makes us hold one more whole response.
            if not self._writable.is_set():
                await self._writable.wait()
                if self._closing:
                    return
            frame = self._queue.popleft()
            self._queued_bytes.remove(len(frame))
            if len(self._queue) < _MAX_QUEUED_FRAMES // 2:
                self._resume("queue")
            self._handling = True
            self._info.throttle_ms = 0
            try:
                reply = await self._handler(frame, self._info)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("request from %s failed; closing connection", self._info.peer)
                self.abort()
                return
            finally:
                self._handling = False
                self._progress.at = asyncio.get_running_loop().time()
            if reply is None:
                self.abort()
                return
            muted_until = self._progress.at + self._info.throttle_ms / 1000
            if reply:
                if self._closing:
                    return
                self._writing = True
                try:
                    written = await self._writer.write(
                        transport, self._sock_fd, reply, self._progress
                    )
                finally:
                    self._writing = False
                if not written:
                    self.abort()
                    return
            if self._info.throttle_ms > 0:
                await self._mute(muted_until)

    async def _mute(self, until: float) -> None:
        """KIP-219: read no request until loop time ``until`` (the throttle time counted
        from when the request was answered). The client was told the throttle time in
        the response; one that sends regardless waits in its socket buffer."""
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        self._muted = True
        self._pause("mute")
        try:
            await asyncio.sleep(max(until - loop.time(), 0.0))
        finally:
            self._muted = False
            self._progress.at = loop.time()
            self._resume("mute")

    def _pause(self, reason: str) -> None:
        if not self._paused_for and self._transport is not None:
            self._transport.pause_reading()
        self._paused_for.add(reason)

    def _resume(self, reason: str) -> None:
        if reason not in self._paused_for:
            return
        self._paused_for.discard(reason)
        if not self._paused_for and not self._closing and self._transport is not None:
            self._transport.resume_reading()

    def _memory_available(self) -> None:
        self._resume("memory")

    def abort(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        """Graceful close: used at shutdown after in-flight requests finish."""
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    @property
    def busy(self) -> bool:
        """A request is being handled or answered (a muted connection is not busy: the
        shutdown does not wait out a throttle)."""
        return self._worker is not None and not self._worker.done() and not self._muted

    @property
    def peer(self) -> str:
        return self._info.peer

    def idle_for(self, now: float) -> float:
        """Seconds since this connection last moved bytes, as of loop time ``now``.

        Gentler than Kafka, whose selector counts only socket activity, so that a request
        parked longer than ``connections.max.idle.ms`` loses its connection: here a
        connection whose request handler is running is never idle (0), whatever it waits
        for (a Fetch in the purgatory, an acks=all Produce, a JoinGroup). The request has a
        deadline of its own (``max_wait_ms``, a timeout), and cutting it would only make
        the client retry. Its idle time starts when the handler returns. A connection muted
        by a quota is not idle either (its client is made to wait); its idle time starts
        again when the mute ends."""
        if self._handling or self._muted:
            return 0.0
        pending = self._pending_output()
        if pending < self._pending_at_last_look:
            self._progress.at = now
        self._pending_at_last_look = pending
        return max(now - self._progress.at, 0.0)

    def _pending_output(self) -> int:
        """Bytes of replies the client has not taken yet: the transport's buffer, plus the
        kernel's send queue while a reply is being written and until that queue is empty
        (a system call, once per sweep, paid only by a connection with output in flight)."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return 0
        pending = transport.get_write_buffer_size()
        in_flight = pending or self._writing or self._pending_at_last_look
        if in_flight and self._sock_fd is not None:
            pending += _kernel_send_queue(self._sock_fd)
        return pending


def _kernel_send_queue(fd: int) -> int:
    """Bytes in a TCP socket's send queue not yet acknowledged by the peer (Linux's
    SIOCOUTQ, which is TIOCOUTQ); 0 where the system does not say."""
    try:
        raw = fcntl.ioctl(fd, termios.TIOCOUTQ, bytes(4))
    except OSError:
        return 0
    return int.from_bytes(raw, sys.byteorder, signed=True)
