"""Writing a response to a client's socket, log file ranges with ``sendfile(2)``.

A hot Fetch's records are a ``FileRegion`` of a segment file (``tierlog.log.FileSlice``).
Kafka sends such ranges from the page cache to the socket without reading them
(``FileRecords.writeTo``), and so does this writer where the transport is a plain TCP one
(uvloop's, or asyncio's selector transport), whose socket carries the protocol's bytes as
written. A TLS transport needs them encrypted, so there they are read and written through
the transport, and a file system that cannot ``sendfile`` (``EINVAL``, ``ENOSYS``) gets
them read and written to the socket (both counted as copied).

A reply with a region is written to the socket by this writer alone, in order: its buffers
with ``writev``, its regions with ``sendfile``, after whatever the transport still buffers
from an earlier reply has gone. It writes through a duplicate of the socket's descriptor,
taken while the transport is open and closed when the reply is written: the transport may
close its own descriptor meanwhile (the peer reset, the broker stops), and that number can
then be reused by the next accepted connection, so writing to the number the transport had
could send one client's records to another. The socket is non-blocking; when it is full the
writer waits for it to be writable (the duplicate registered with the loop, which refuses
the transport's own) and goes on. A client that reads slowly therefore holds no
records in the broker's memory, only its place in the file, and its connection handles
nothing else meanwhile, as it would behind a full transport buffer.

Each time the socket, full, becomes writable again, the peer has taken bytes: the writer
stamps the connection's ``IoProgress`` then, so a connection whose client reads a long
response slowly is not idle (``connections.max.idle.ms``), and one whose client stopped
reading is.

A region's file stays open while the region exists (``tierlog.log.file_slice``), but a
truncation after the read that made it can leave it short, and its length is already in
the response: the connection is then closed, and the client fetches again, as Kafka closes
it when a ``FileRecords`` shrank during its send.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Sequence
from typing import Protocol, cast

from tierlog.protocol.fetch_response import Buffer, FileRegion, ResponsePart

log = logging.getLogger(__name__)

#: Transport classes whose socket carries the protocol's bytes as written (no TLS layer).
_PLAIN_TRANSPORTS = frozenset({"TCPTransport", "_SelectorSocketTransport"})

#: What ``sendfile`` answers where the file system cannot splice the file to a socket.
_SENDFILE_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})

#: Buffers per ``writev`` call, below every platform's IOV_MAX.
_IOV_MAX = 512


class _ByteCounter(Protocol):
    def inc(self, amount: float = 1) -> None: ...


def sendfile_socket(transport: asyncio.BaseTransport) -> int | None:
    """The socket descriptor a reply with regions is written to directly, or None where
    every byte must go through the transport."""
    if type(transport).__name__ not in _PLAIN_TRANSPORTS:
        return None
    if transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    fd = int(sock.fileno())
    return None if os.get_blocking(fd) else fd  # a blocking send would stall the loop


class IoProgress:
    """The loop time (``loop.time()``) at which a connection last moved bytes.

    One attribute that the connection and its reply writer overwrite as bytes come in or
    go out, and that the broker's idle sweep reads: no timer, lock or system call per
    write."""

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at


class ReplyWriter:
    """Writes replies for every connection of a broker and counts how region bytes went."""

    def __init__(self, sent_from_file: _ByteCounter, copied: _ByteCounter) -> None:
        self._sent_from_file = sent_from_file
        self._copied = copied

    async def write(
        self,
        transport: asyncio.Transport,
        sock_fd: int | None,
        reply: Sequence[ResponsePart],
        progress: IoProgress | None = None,
    ) -> bool:
        """Write ``reply`` in order; False when a region could not be sent whole, or the
        socket failed (close the connection: the response is cut). ``progress`` is stamped
        whenever the socket drained while this writer waited for it."""
        if all(isinstance(p, (bytes, bytearray, memoryview)) for p in reply):
            buffers = cast(Sequence[Buffer], reply)
            if len(buffers) == 1:
                transport.write(buffers[0])
            else:
                transport.writelines(buffers)
            return True
        if sock_fd is None:
            return self._write_copied(transport, reply)
        if transport.is_closing():  # its descriptor may be closed, its number reused
            return False
        sock = os.dup(sock_fd)
        if progress is None:
            progress = IoProgress(0.0)
        try:
            while transport.get_write_buffer_size():  # an earlier reply's tail goes first
                await _writable(sock, progress)
            await self._write_direct(sock, reply, progress)
        except _RegionCut as e:
            log.warning("cannot send %s", e)
            return False
        except OSError as e:
            log.info("writing a reply stopped: %s", e)
            return False
        finally:
            os.close(sock)
        return True

    async def _write_direct(
        self, sock: int, reply: Sequence[ResponsePart], progress: IoProgress
    ) -> None:
        pending: list[Buffer] = []
        for part in reply:
            if isinstance(part, (bytes, bytearray, memoryview)):
                pending.append(part)
                continue
            await _send_buffers(sock, pending, progress)
            pending = []
            await self._send_region(sock, part, progress)
        await _send_buffers(sock, pending, progress)

    async def _send_region(self, sock: int, region: FileRegion, progress: IoProgress) -> None:
        size = len(region)
        sent = 0
        try:
            while sent < size:
                try:
                    n = os.sendfile(sock, region.fd, region.position + sent, size - sent)
                except BlockingIOError:
                    await _writable(sock, progress)
                    continue
                except OSError as e:
                    if e.errno not in _SENDFILE_UNSUPPORTED:
                        raise
                    break  # a file system without sendfile: the rest is read and written
                if n == 0:
                    raise _RegionCut(f"{region!r}: the file ends {size - sent} bytes short")
                sent += n
        finally:
            self._sent_from_file.inc(sent)
        if sent < size:
            try:
                rest = region.read(sent)
            except OSError as e:
                raise _RegionCut(f"{region!r}: {e}") from e
            self._copied.inc(len(rest))
            await _send_buffers(sock, [rest], progress)

    def _write_copied(self, transport: asyncio.Transport, reply: Sequence[ResponsePart]) -> bool:
        out: list[Buffer] = []
        for part in reply:
            if isinstance(part, (bytes, bytearray, memoryview)):
                out.append(part)
                continue
            try:
                out.append(part.read())
            except OSError as e:
                log.warning("cannot send %r: %s", part, e)
                return False
            self._copied.inc(len(part))
        transport.writelines(out)
        return True


class _RegionCut(Exception):
    """A region's file no longer holds all of it."""


async def _send_buffers(sock: int, buffers: list[Buffer], progress: IoProgress) -> None:
    """``writev`` all of ``buffers``, waiting whenever the socket is full."""
    views = [memoryview(b) for b in buffers if len(b)]
    while views:
        try:
            n = os.writev(sock, views[:_IOV_MAX])
        except BlockingIOError:
            await _writable(sock, progress)
            continue
        while n and n >= len(views[0]):
            n -= len(views.pop(0))
        if n:
            views[0] = views[0][n:]


async def _writable(sock: int, progress: IoProgress) -> None:
    """Until the socket (the writer's duplicate) can take more bytes, or has failed, which
    the next send reports. Room in a socket that was full means the peer took bytes, which
    is progress."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_writer(sock, _settle, ready)
    try:
        await ready
    finally:
        loop.remove_writer(sock)
    progress.at = loop.time()


def _settle(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
