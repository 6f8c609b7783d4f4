"""An HTTP/1.1 TCP proxy that adds latency per request and injects object-store faults.

Put it between a client and an S3-compatible server (moto, MinIO) to make the server
behave like a real object store (about 50 ms to first byte) and to script failures:
503 SlowDown replies, connection resets, extra slowness. It counts requests by method so
tests and benchmarks can check how many GETs a read really issued on the wire.

It parses just enough HTTP to find request boundaries (request line, headers,
Content-Length or chunked body) and assumes the client does not pipeline, which holds for
the usual HTTP clients (reqwest, urllib3). Each request is delayed before it is forwarded.

Use in-process::

    proxy = LatencyProxy("127.0.0.1", 5000, latency_s=0.05)
    port = proxy.start()             # background thread with its own event loop
    proxy.inject(Fault("503", count=2, method="PUT"))
    ...
    proxy.stop()

or standalone: ``python bench/latency_proxy.py --upstream 127.0.0.1:5000 --latency-ms 50``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import struct
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Response bytes relayed per read: large, so a multi-MiB GET body costs a few loop
#: iterations rather than one per 64 KiB (the relay's CPU competes with the server and
#: the broker on a small machine).
_RELAY_BUFFER = 1 << 20

_SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


@dataclass
class Fault:
    """Applies to the next ``count`` requests matching ``method`` / ``path_contains``.

    kind: ``503`` answers SlowDown without contacting the server; ``reset`` drops the
    connection (TCP RST) without answering; ``slow`` adds ``delay_s`` before forwarding;
    ``stall`` forwards nothing, answers nothing for ``delay_s``, then drops the connection
    (a client with a shorter timeout sees a timeout); ``hold`` forwards the request and
    relays the first ``after_bytes`` bytes of its response (headers included), then holds
    the rest until ``LatencyProxy.release_held`` (a body still on its way).
    """

    kind: str
    count: int = 1
    method: str | None = None
    path_contains: str | None = None
    delay_s: float = 1.0
    after_bytes: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.count <= 0:
            return False
        if self.method is not None and method != self.method:
            return False
        return self.path_contains is None or self.path_contains in path


@dataclass
class RequestLog:
    by_method: Counter[str] = field(default_factory=Counter)
    entries: list[tuple[str, str, str | None]] = field(default_factory=list)
    faults_applied: Counter[str] = field(default_factory=Counter)


class LatencyProxy:
    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        latency_s: float = 0.05,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.latency_s = latency_s
        self._listen = (listen_host, listen_port)
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self.log = RequestLog()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._ready = threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self._held: set[asyncio.Event] = set()

    # -- control (thread-safe) ----------------------------------------------------------

    def start(self) -> int:
        self._thread = threading.Thread(target=self._run, name="latency-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("latency proxy did not start")
        return self.port

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def pin(self, cpus: set[int]) -> None:
        """Run the proxy's thread on ``cpus`` only (a benchmark keeping it off the cores of
        the process it measures)."""
        assert self._thread is not None and self._thread.native_id is not None
        os.sched_setaffinity(self._thread.native_id, cpus)

    def inject(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def reset_counts(self) -> None:
        with self._lock:
            self.log = RequestLog()

    def count(self, method: str) -> int:
        with self._lock:
            return self.log.by_method[method]

    def entries(self) -> list[tuple[str, str, str | None]]:
        """A copy of the request log: (method, path, Range header) in arrival order."""
        with self._lock:
            return list(self.log.entries)

    def release_held(self) -> None:
        """Relay the rest of every response a ``hold`` fault is holding."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._release_all)

    def _release_all(self) -> None:
        for opened in self._held:
            opened.set()
        self._held.clear()

    def drop_connections(self) -> None:
        """Abort every open client connection (as if the server went away)."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._abort_all)

    # -- event loop ---------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(
            asyncio.start_server(self._handle, self._listen[0], self._listen[1])
        )
        self._server = server
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            self._abort_all()
            # let every connection task see its aborted sockets and end by itself, so none
            # is destroyed pending when the loop closes (cancelling them instead makes
            # asyncio's server callback log each CancelledError)
            tasks = asyncio.all_tasks(loop)
            if tasks:
                with contextlib.suppress(Exception):
                    loop.run_until_complete(asyncio.wait(tasks, timeout=2))
            with contextlib.suppress(Exception):
                loop.run_until_complete(server.wait_closed())
            loop.close()

    def _abort_all(self) -> None:
        for writer in list(self._writers):
            _reset(writer)
        self._writers.clear()

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    self.log.faults_applied[fault.kind] += 1
                    return fault
        return None

    def _record(self, method: str, path: str, range_header: str | None) -> None:
        with self._lock:
            self.log.by_method[method] += 1
            self.log.entries.append((method, path, range_header))

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._writers.add(client_w)
        gate = _Gate()
        upstream_w: asyncio.StreamWriter | None = None
        pump: asyncio.Task[None] | None = None
        try:
            while True:
                head = await _read_head(client_r)
                if head is None:
                    return
                method, path, headers = _parse_head(head)
                body = await _read_body(client_r, headers)
                self._record(method, path, headers.get("range"))
                fault = self._take_fault(method, path)
                if fault is not None and fault.kind == "reset":
                    _reset(client_w)
                    return
                if fault is not None and fault.kind == "503":
                    client_w.write(
                        b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                        + f"Content-Length: {len(_SLOWDOWN_BODY)}\r\n\r\n".encode()
                        + _SLOWDOWN_BODY
                    )
                    await client_w.drain()
                    continue
                if fault is not None and fault.kind == "stall":
                    await asyncio.sleep(fault.delay_s)
                    _reset(client_w)
                    return
                if fault is not None and fault.kind == "hold":
                    # the previous response was relayed whole before this request came
                    gate.limit = gate.relayed + fault.after_bytes
                    gate.opened = asyncio.Event()
                    self._held.add(gate.opened)
                    fault = None
                delay = self.latency_s + (fault.delay_s if fault is not None else 0.0)
                if delay > 0:
                    await asyncio.sleep(delay)
                if upstream_w is None or upstream_w.is_closing() or (pump and pump.done()):
                    if pump is not None:
                        await pump
                        # upstream closed after its last response: client must reconnect
                        return
                    upstream_r, upstream_w = await asyncio.open_connection(
                        *self.upstream, limit=_RELAY_BUFFER
                    )
                    pump = asyncio.create_task(_pipe(upstream_r, client_w, gate))
                upstream_w.write(head + body)
                await upstream_w.drain()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        finally:
            self._writers.discard(client_w)
            if upstream_w is not None:
                upstream_w.close()
            if pump is not None:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(pump, 5)
            if not client_w.is_closing():
                client_w.close()


class _Gate:
    """Where one connection's relay of responses stops until opened (a ``hold`` fault)."""

    def __init__(self) -> None:
        self.relayed = 0
        self.limit: int | None = None
        self.opened: asyncio.Event | None = None

    async def relay(self, data: bytes, writer: asyncio.StreamWriter) -> None:
        limit, opened = self.limit, self.opened
        if limit is not None and opened is not None and self.relayed + len(data) > limit:
            k = max(0, limit - self.relayed)
            writer.write(data[:k])
            await writer.drain()
            self.relayed += k
            data = data[k:]
            await opened.wait()
            self.limit = self.opened = None
        writer.write(data)
        await writer.drain()
        self.relayed += len(data)


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: _Gate | None = None
) -> None:
    try:
        while data := await reader.read(_RELAY_BUFFER):
            if gate is None:
                writer.write(data)
                await writer.drain()
            else:
                await gate.relay(data, writer)
    except (ConnectionError, OSError):
        pass
    finally:
        if not writer.is_closing():
            writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise
        return None


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            parts.append(size_line)
            size = int(size_line.split(b";")[0].strip(), 16)
            data = await reader.readexactly(size + 2)
            parts.append(data)
            if size == 0:
                return b"".join(parts)
    return b""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upstream", required=True, help="host:port of the real server")
    parser.add_argument("--listen", default="127.0.0.1:0", help="host:port to listen on")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args(argv)
    up_host, up_port = args.upstream.rsplit(":", 1)
    host, port = args.listen.rsplit(":", 1)
    proxy = LatencyProxy(
        up_host,
        int(up_port),
        latency_s=args.latency_ms / 1000,
        listen_host=host,
        listen_port=int(port),
    )
    print(f"listening on {host}:{proxy.start()}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
