"""Replies with log file ranges, written to real sockets on both event loops the broker may
run: sent with sendfile in order with the buffers around them, waiting while the socket is
full; read and written through the transport where there is no socket to send to; a range
whose file was closed or cut is refused."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import uvloop

from tests.helpers.poll import wait_until_async
from tests.helpers.wire import frame
from tierlog.log.file_slice import FileSlice, OpenFile
from tierlog.protocol.fetch_response import ResponsePart
from tierlog.server.connection import ConnectionInfo, KafkaConnection
from tierlog.server.reply_writer import ReplyWriter, sendfile_socket

DATA = os.urandom(3 << 20)


class _Count:
    def __init__(self) -> None:
        self.total = 0.0

    def inc(self, amount: float = 1) -> None:
        self.total += amount


def _file(path: Path) -> OpenFile:
    """A segment's open ``.log`` file holding ``DATA``."""
    path.write_bytes(DATA)
    return OpenFile(os.open(path, os.O_RDONLY))


Scenario = Callable[[asyncio.Transport, socket.socket], Awaitable[None]]


def _run(new_loop: Callable[[], asyncio.AbstractEventLoop], scenario: Scenario) -> None:
    """``scenario(transport, client socket)`` on a TCP connection of a fresh loop."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[asyncio.Transport] = loop.create_future()

        class _Server(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                made.set_result(transport)  # type: ignore[arg-type]

        server = await loop.create_server(_Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)  # before connect
        client.setblocking(False)
        await loop.sock_connect(client, ("127.0.0.1", port))
        transport = await asyncio.wait_for(made, 10)
        try:
            await asyncio.wait_for(scenario(transport, client), 30)
        finally:
            transport.close()
            client.close()
            server.close()

    loop = new_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


async def _receive(client: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    got = bytearray()
    while len(got) < size:
        chunk = await loop.sock_recv(client, 1 << 20)
        assert chunk, "connection closed early"
        got += chunk
    return bytes(got)


LOOPS = pytest.mark.parametrize(
    "new_loop", [uvloop.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"]
)


@LOOPS
def test_file_ranges_go_out_with_sendfile_in_order_while_the_client_reads_slowly(
    tmp_path: Path, new_loop: Callable[[], asyncio.AbstractEventLoop]
) -> None:
    sent, copied = _Count(), _Count()
    writer = ReplyWriter(sent, copied)
    file = _file(tmp_path / "00000000000000000000.log")
    first, second = FileSlice(file, 100, 2 << 20, 0), FileSlice(file, 7, 900_000, 0)
    big = os.urandom(300_000)
    reply: list[ResponsePart] = [b"head", first, bytearray(b"middle"), big, second, b"end"]
    expected = b"".join(
        [b"head", DATA[100 : 100 + (2 << 20)], b"middle", big, DATA[7:900_007], b"end"]
    )

    async def scenario(transport: asyncio.Transport, client: socket.socket) -> None:
        fd = sendfile_socket(transport)
        assert fd is not None and not os.get_blocking(fd)
        # a send buffer far smaller than the reply: the writer waits for the socket again
        # and again, and the transport must not write in between
        with socket.socket(fileno=os.dup(fd)) as server_side:
            server_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        earlier = os.urandom(1 << 20)  # mostly left in the transport's buffer
        transport.write(earlier)
        assert transport.get_write_buffer_size() > 0
        writing = asyncio.ensure_future(writer.write(transport, fd, reply))
        received = await _receive(client, len(earlier) + len(expected))
        assert await writing
        assert received == earlier + expected
        transport.write(b"later reply")
        assert await _receive(client, len(b"later reply")) == b"later reply"

    _run(new_loop, scenario)
    assert (sent.total, copied.total) == ((2 << 20) + 900_000, 0)


@LOOPS
def test_without_a_sendfile_socket_the_ranges_are_read_and_written(
    tmp_path: Path, new_loop: Callable[[], asyncio.AbstractEventLoop]
) -> None:
    sent, copied = _Count(), _Count()
    file = _file(tmp_path / "00000000000000000000.log")

    async def scenario(transport: asyncio.Transport, client: socket.socket) -> None:
        writer = ReplyWriter(sent, copied)
        assert await writer.write(transport, None, [FileSlice(file, 5, 1000, 0)])
        assert await _receive(client, 1000) == DATA[5:1005]

    _run(new_loop, scenario)
    assert (sent.total, copied.total) == (0, 1000)


def test_a_range_its_file_no_longer_holds_is_refused(tmp_path: Path) -> None:
    file = _file(tmp_path / "00000000000000000000.log")
    region = FileSlice(file, 1 << 20, 1 << 20, 0)
    os.truncate(tmp_path / "00000000000000000000.log", (3 << 19))  # half of the range left

    async def scenario(transport: asyncio.Transport, client: socket.socket) -> None:
        writer = ReplyWriter(_Count(), _Count())
        assert not await writer.write(transport, sendfile_socket(transport), [b"head", region])
        assert not await writer.write(transport, None, [b"head", region])

    _run(uvloop.new_event_loop, scenario)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_closed_connection_gets_no_reply_written(tmp_path: Path) -> None:
    file = _file(tmp_path / "00000000000000000000.log")

    async def scenario(transport: asyncio.Transport, client: socket.socket) -> None:
        fd = sendfile_socket(transport)
        transport.close()
        before = _open_fds()
        sent = _Count()
        assert not await ReplyWriter(sent, _Count()).write(
            transport, fd, [b"head", FileSlice(file, 0, 1000, 0)]
        )
        assert (_open_fds(), sent.total) == (before, 0)

    _run(uvloop.new_event_loop, scenario)


def test_a_client_that_resets_mid_reply_leaves_no_descriptor_behind(tmp_path: Path) -> None:
    """A reply larger than both sockets' buffers (12 MiB; a send buffer grows to 4 MiB
    here) is still being written when the client resets its connection: the connection's
    task is cancelled, the writer's duplicate of the socket is closed, and the broker's
    socket with it."""
    file = _file(tmp_path / "00000000000000000000.log")
    sent = _Count()
    writer = ReplyWriter(sent, _Count())

    async def handler(frame: bytes, info: ConnectionInfo) -> list[ResponsePart]:
        return [b"head", *(FileSlice(file, 0, len(DATA), 0) for _ in range(4))]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        connections: set[KafkaConnection] = set()
        server = await loop.create_server(
            lambda: KafkaConnection(handler, 1 << 20, connections, writer), "127.0.0.1", 0
        )
        baseline = _open_fds()
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
        client.setblocking(False)
        await loop.sock_connect(client, server.sockets[0].getsockname())
        await loop.sock_sendall(client, frame(b"request"))
        await wait_until_async(lambda: _open_fds() == baseline + 3, 10)  # client, server, dup
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset
        await wait_until_async(lambda: _open_fds() == baseline and not connections, 10)
        assert 0 < sent.total < 4 * len(DATA)
        server.close()

    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_file_system_without_sendfile_gets_its_ranges_read_and_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``sendfile`` answers EINVAL (a file system that cannot splice to a socket,
    which this machine's have not, hence the patched call), the bytes still go out whole."""

    def unsupported(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "sendfile", unsupported)
    sent, copied = _Count(), _Count()
    file = _file(tmp_path / "00000000000000000000.log")
    reply: list[ResponsePart] = [b"head", FileSlice(file, 10, 2 << 20, 0), b"end"]

    async def scenario(transport: asyncio.Transport, client: socket.socket) -> None:
        writing = asyncio.ensure_future(
            ReplyWriter(sent, copied).write(transport, sendfile_socket(transport), reply)
        )
        received = await _receive(client, 7 + (2 << 20))
        assert await writing
        assert received == b"head" + DATA[10 : 10 + (2 << 20)] + b"end"

    _run(uvloop.new_event_loop, scenario)
    assert (sent.total, copied.total) == (0, 2 << 20)
