"""Ranged GETs of presigned URLs, received straight into the chunk buffer pool.

obstore receives a body into buffers of its own and hands back a fresh allocation per
chunk. For the chunk GETs of a cold read that costs about 0.2 CPU-s per GiB more than
receiving into a reused buffer (measured side by side against s3rver: 0.64-0.77 against
0.51-0.52 CPU-s per GiB including the HTTP client), because the fresh memory is faulted in
page by page. No maintained Python HTTP client reads a body into a caller's buffer without
an extra copy (urllib3's ``readinto`` reads into its own buffer first), so this module uses
the standard library's ``http.client``, whose ``readinto`` receives from the socket into
the caller's buffer.

Over plain HTTP the exchange itself is this module's: one request written with one
``sendall``, the response head received into a reused buffer and parsed here, the body
received straight into the slot (``_receive_plain``). ``http.client`` costs about 0.3 ms of
CPU more per GET for the same exchange (a buffered reader and a response object per
request, and its headers parsed by the ``email`` package: 0.88-0.99 against 0.60-0.67 ms
per 4 MiB GET from a local server, 0.08 CPU-s per GiB), and the chunk GETs of a cold read
are all the same shape: a ranged GET of a presigned URL answered with a ``Content-Length``
body. Anything else (a chunked body, a malformed head, a status other than 200/206) is
a ``DirectGetError``, which obstore repeats. TLS stays with ``http.client``.

obstore still does the part that needs care: it signs the URL (S3, GCS and Azure each have
their own scheme and credential providers), and it serves every request this module does
not take. The caller falls back to obstore on any error here, so obstore's retries and error
translation still decide what a failed GET means.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta

import obstore
from obstore.store import AzureStore, GCSStore, S3Store

from tierlog.storage.objectstore.arriving import Arriving
from tierlog.storage.objectstore.buffers import ChunkBuffers

#: How long a presigned URL is valid, and after how long it is signed again.
_URL_VALID = timedelta(hours=1)
_RESIGN_AFTER_S = 30 * 60.0
#: Presigned URLs kept (one per segment object being read).
_URLS_KEPT = 1024
#: The most one receive of a plain-HTTP body waits for (``_receive_plain``): a whole
#: default chunk. The kernel caps it at half of ``net.ipv4.tcp_rmem``'s maximum.
_RECEIVE_AT_ONCE = 4 << 20
#: The receive step of a body that a reader takes as it arrives.
_ARRIVING_STEP = 128 * 1024
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
#: The most a response's status line and headers may take (S3's are under 1 KiB).
_HEAD_MAX = 16 * 1024


def _receive(
    response: http.client.HTTPResponse, view: memoryview, key: str, arriving: Arriving | None
) -> None:
    """The body into ``view`` through ``http.client`` (TLS: decrypted record by record).
    ``readinto`` returns only once its buffer is full, so with ``arriving`` the body is
    received in steps of ``_ARRIVING_STEP``, each announced as it lands."""
    got = 0
    step = len(view) if arriving is None else _ARRIVING_STEP
    while got < len(view):
        n = response.readinto(view[got : got + step])
        if not n:
            raise DirectGetError(f"GET {key}: body ended at {got} of {len(view)} bytes")
        got += n
        if arriving is not None:
            arriving.received(got)


def _receive_plain(
    sock: socket.socket, view: memoryview, got: int, key: str, arriving: Arriving | None
) -> None:
    """The rest of the body into ``view`` (its first ``got`` bytes are there) straight from
    a plain TCP socket, in receives of up to ``_RECEIVE_AT_ONCE`` bytes (``_ARRIVING_STEP``
    with ``arriving``, whose reader wants the first bytes early).

    A body arrives in pieces (one per TCP burst), and a plain receive wakes the thread for
    each: with a latency proxy on the path that was most of the GET threads' CPU.
    ``SO_RCVLOWAT`` makes the kernel wake the thread only once that many bytes are waiting,
    and it is set to no more than what is left of the body, so the last receive cannot
    wait for bytes that will never come (measured client CPU per GiB, 4 MiB GETs through the
    proxy: 0.41-0.46 s in receives as they come, 0.25 s in receives of up to 1 MiB). A whole
    chunk at once also takes the GIL once per chunk instead of once per MiB: with the event
    loop busy serving, each of those was a wait and a context switch (broker context
    switches per GiB read cold: 11,000-12,000 with 1 MiB, 8,700-9,200 with 4 MiB). Not on
    TLS, where the bytes waiting in the kernel are not the bytes left of the body."""
    n = len(view)
    if arriving is not None:
        arriving.received(got)
    lowat = 1
    at_once = _RECEIVE_AT_ONCE if arriving is None else _ARRIVING_STEP
    try:
        while got < n:
            want = min(n - got, at_once)
            if want != lowat:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
                lowat = want
            k = sock.recv_into(view[got:], n - got)
            if not k:
                raise DirectGetError(f"GET {key}: body ended at {got} of {n} bytes")
            got += k
            if arriving is not None:
                arriving.received(got)
    finally:
        if lowat != 1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)


class _PlainConnection:
    """A keep-alive plain-HTTP connection of one GET thread, with its reused head buffer."""

    __slots__ = ("head", "sock")

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.head = bytearray(_HEAD_MAX)

    def close(self) -> None:
        self.sock.close()

    def get(
        self,
        url: urllib.parse.SplitResult,
        key: str,
        start: int,
        end: int,
        view: memoryview,
        arriving: Arriving | None,
    ) -> bool:
        """Bytes [start, end) of the object at ``url`` into ``view``; True when the server
        closes the connection after this response."""
        self.sock.sendall(
            f"GET {_target(url)} HTTP/1.1\r\nHost: {url.netloc}\r\nAccept-Encoding: identity\r\n"
            f"Range: bytes={start}-{end - 1}\r\n\r\n".encode("ascii")
        )
        head = self.head
        got = 0
        while True:
            k = self.sock.recv_into(memoryview(head)[got:])
            if not k:
                raise DirectGetError(f"GET {key}: connection closed in the response head")
            got += k
            stop = head.find(b"\r\n\r\n", max(0, got - k - 3), got)
            if stop >= 0:
                break
            if got == len(head):
                raise DirectGetError(f"GET {key}: response head over {len(head)} bytes")
        status, reason, headers, keep_alive = _parse_head(bytes(head[:stop]), key)
        _check(status, reason, headers.get, key, start, end)
        if "transfer-encoding" in headers:
            raise DirectGetError(f"GET {key}: Transfer-Encoding {headers['transfer-encoding']}")
        body = got - stop - 4
        if body > len(view):
            raise DirectGetError(f"GET {key}: {body} bytes after a body of {len(view)}")
        view[:body] = memoryview(head)[stop + 4 : got]
        if arriving is not None:
            arriving.started(view)
        _receive_plain(self.sock, view, body, key, arriving)
        return not keep_alive


def _parse_head(head: bytes, key: str) -> tuple[int, str, dict[str, str], bool]:
    """Status, reason, headers (names lower-cased) of a response head, and whether its
    connection stays open for the next request (HTTP/1.1's default, HTTP/1.0's exception)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise DirectGetError(f"GET {key}: status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise DirectGetError(f"GET {key}: header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep_alive = connection == "keep-alive" if parts[0] == "HTTP/1.0" else connection != "close"
    return int(parts[1]), parts[2] if len(parts) > 2 else "", headers, keep_alive


def _check(
    status: int,
    reason: str,
    header: Callable[[str], str | None],
    key: str,
    start: int,
    end: int,
) -> None:
    if status not in (200, 206):
        raise DirectGetError(f"GET {key}: HTTP {status} {reason}")
    length = header("content-length")
    if length is None or not length.isdigit() or int(length) != end - start:
        raise DirectGetError(f"GET {key}: Content-Length {length}, expected {end - start}")
    if status == 206:
        m = _CONTENT_RANGE.fullmatch(header("content-range") or "")
        if m is None or int(m.group(1)) != start or int(m.group(2)) != end - 1:
            raise DirectGetError(f"GET {key}: Content-Range {m and m.group(0)!r}")
    elif start != 0:
        raise DirectGetError(f"GET {key}: whole object where a range was asked for")


class DirectGetError(Exception):
    """A GET this path could not complete; the caller repeats it through obstore."""


class _TlsConnection:
    """A keep-alive HTTPS connection of one GET thread, through ``http.client``."""

    __slots__ = ("conn",)

    def __init__(self, host: str, port: int | None, timeout_s: float) -> None:
        self.conn = http.client.HTTPSConnection(host, port, timeout=timeout_s)

    def close(self) -> None:
        self.conn.close()

    def get(
        self,
        url: urllib.parse.SplitResult,
        key: str,
        start: int,
        end: int,
        view: memoryview,
        arriving: Arriving | None,
    ) -> bool:
        """As ``_PlainConnection.get``."""
        self.conn.request("GET", _target(url), headers={"Range": f"bytes={start}-{end - 1}"})
        response = self.conn.getresponse()
        _check(response.status, response.reason, response.getheader, key, start, end)
        if arriving is not None:
            arriving.started(view)
        _receive(response, view, key, arriving)
        return bool(response.will_close)


def _target(url: urllib.parse.SplitResult) -> str:
    return f"{url.path}?{url.query}" if url.query else url.path


_Connection = _PlainConnection | _TlsConnection


class DirectRangeReader:
    """Ranged GETs over keep-alive connections, one per thread, into pool slots."""

    def __init__(
        self, store: S3Store | GCSStore | AzureStore, buffers: ChunkBuffers, timeout_s: float
    ) -> None:
        self._store = store
        self.buffers = buffers
        self._timeout_s = timeout_s
        self._urls: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._urls_lock = threading.Lock()
        self._local = threading.local()
        self._open: set[_Connection] = set()
        self._open_lock = threading.Lock()

    def get_into(
        self, key: str, start: int, end: int, arriving: Arriving | None = None
    ) -> memoryview | None:
        """Bytes [start, end) of ``key`` in a pool slot, or None when no slot is free.
        Raises ``DirectGetError`` (or an ``OSError``) when the GET fails here. With
        ``arriving``, the body's bytes are announced there as they are received."""
        url = urllib.parse.urlsplit(self._url(key))
        conn = self._connection(url)  # may connect: no slot is held while it waits
        view = self.buffers.lease(end - start)
        if view is None:
            return None
        try:
            if conn.get(url, key, start, end, view, arriving):
                self._drop(conn)
        except BaseException:
            self._drop(conn)
            view.release()
            raise
        return view

    def _url(self, key: str) -> str:
        now = time.monotonic()
        with self._urls_lock:
            kept = self._urls.get(key)
            if kept is not None and now - kept[1] < _RESIGN_AFTER_S:
                self._urls.move_to_end(key)
                return kept[0]
        url = str(obstore.sign(self._store, "GET", key, _URL_VALID))
        with self._urls_lock:
            self._urls[key] = (url, now)
            while len(self._urls) > _URLS_KEPT:
                self._urls.popitem(last=False)
        return url

    def _connection(self, url: urllib.parse.SplitResult) -> _Connection:
        conns: dict[tuple[str, str, int | None], _Connection] | None = getattr(
            self._local, "conns", None
        )
        if conns is None:
            conns = self._local.conns = {}
        where = (url.scheme, url.hostname or "", url.port)
        conn = conns.get(where)
        if conn is None:
            host = url.hostname or ""
            if url.scheme == "https":
                conn = _TlsConnection(host, url.port, self._timeout_s)
            else:
                conn = _PlainConnection(host, url.port or 80, self._timeout_s)
            conns[where] = conn
            with self._open_lock:
                self._open.add(conn)
        return conn

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        with self._open_lock:
            self._open.discard(conn)
        conns = getattr(self._local, "conns", {})
        for where, kept in list(conns.items()):
            if kept is conn:
                del conns[where]

    def close(self) -> None:
        """No new leases, and every kept connection closed (a GET still on one fails, and
        its caller's fallback finds the store closed)."""
        self.buffers.close()
        with self._open_lock:
            conns, self._open = self._open, set()
        for conn in conns:
            conn.close()
