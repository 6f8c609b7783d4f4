"""``connections.max.idle.ms`` against a real broker: a connection without I/O progress is
closed (one that never sends; one whose client stopped reading a large Fetch sent from the
log file, or pipelined answers written through the transport), and the idle-close counter
rises; a client that keeps talking, one that reads a large response slowly, and one whose
long-poll Fetch waits longer than the idle time are left alone."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka as ck

from tests.helpers.broker import BrokerProcess
from tests.helpers.confluent import consume_assigned
from tests.helpers.poll import wait_until
from tests.helpers.wire import (
    connection_closed,
    fetch_fields,
    fetch_partition,
    raw_connection,
    recv_exact,
    recv_frame,
)
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import decode_response, encode_request, request_schema
from tierlog.server.broker import idle_sweep_interval_ms

IDLE_MS = 1000
CLOSED = "tierlog_idle_connections_closed_total"
VALUE = 1000


Factory = Callable[..., BrokerProcess]


def _idle_broker(broker_factory: Factory) -> BrokerProcess:
    return broker_factory({"connections.max.idle.ms": str(IDLE_MS)})


def _produce(b: BrokerProcess, topic: str, count: int) -> None:
    """``count`` records of ``VALUE`` bytes to partition 0 of a new topic."""
    with WireConnection(*b.host_port) as conn:
        assert conn.create_topic(topic, 1)[0] == 0
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 262144})
    for i in range(count):
        p.produce(topic, value=b"%06d" % i + b"x" * (VALUE - 6), partition=0)
    assert p.flush(60) == 0


def _fetch_frame(topic: str, correlation_id: int, max_bytes: int) -> bytes:
    fields = fetch_fields({topic: [fetch_partition(0, 0, max_bytes)]}, max_bytes=max_bytes)
    schema = request_schema(ApiKey.FETCH, 12)
    assert schema is not None
    return encode_request(ApiKey.FETCH, 12, correlation_id, "idle-test", mk(schema, **fields))


def _kernel_buffering() -> int:
    """More than the kernel can hold of a response on loopback: the broker's send buffer
    at its largest (``tcp_wmem``'s maximum), the small receive buffer the tests' readers
    ask for, and a margin."""
    try:
        wmem_max = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        wmem_max = 4 << 20
    return wmem_max + (1 << 20)


def _api_versions_frame(correlation_id: int) -> bytes:
    schema = request_schema(ApiKey.API_VERSIONS, 3)
    assert schema is not None
    body = mk(schema, client_software_name="idle-test", client_software_version="1")
    return encode_request(ApiKey.API_VERSIONS, 3, correlation_id, "idle-test", body)


def _closed_as_idle(b: BrokerProcess, sock: socket.socket) -> bool:
    """Whether the broker logged closing this socket's connection as idle (the counter
    alone could count a client library's spare connection)."""
    host, port = sock.getsockname()[:2]
    return f"closing connection from {host}:{port}: idle for" in b.stderr


def _read_until_closed(sock: socket.socket, timeout_s: float = 30.0) -> bytes:
    """Everything the broker sent before it closed the connection."""
    sock.settimeout(timeout_s)
    got = bytearray()
    try:
        while chunk := sock.recv(1 << 20):
            got += chunk
    except ConnectionResetError:
        pass
    return bytes(got)


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_time(
    broker_factory: Factory,
) -> None:
    b = _idle_broker(broker_factory)
    before = b.metric(CLOSED)
    with raw_connection(b.host_port) as sock:
        start = time.monotonic()
        assert connection_closed(sock, timeout_s=15), "the broker kept a silent connection"
        closed_after = time.monotonic() - start
        assert closed_after >= IDLE_MS / 1000 * 0.95
        wait_until(lambda: _closed_as_idle(b, sock), timeout_s=10, what="the log line")
    assert b.metric(CLOSED) >= before + 1
    assert "(connections.max.idle.ms=1000)" in b.stderr


def test_a_client_that_keeps_making_requests_is_not_closed(broker_factory: Factory) -> None:
    """One connection asking every 200 ms for 3 s (three idle times): the pauses between
    requests are the client's pace, each shorter than the idle time."""
    b = _idle_broker(broker_factory)
    before = b.metric(CLOSED)
    with WireConnection(*b.host_port, timeout_s=10) as conn:
        assert conn.create_topic("busy", 1)[0] == 0
        end = time.monotonic() + 3.0
        asked = 0
        while time.monotonic() < end:
            r = conn.call(ApiKey.METADATA, 9, topics=[{"name": "busy"}])
            assert r.topics[0].name == "busy"
            asked += 1
            time.sleep(0.2)
        assert asked >= 10
        conn.call(ApiKey.API_VERSIONS, 3)  # still the same connection
    assert b.metric(CLOSED) == before


def test_a_client_that_stops_reading_a_large_fetch_is_closed_and_others_are_served(
    broker_factory: Factory,
) -> None:
    b = _idle_broker(broker_factory)
    records = 2 * _kernel_buffering() // VALUE
    _produce(b, "big", records)
    before = b.metric(CLOSED)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    sock.connect(b.host_port)
    with sock:
        sock.sendall(_fetch_frame("big", 1, 64 << 20))
        sent_at = time.monotonic()
        wait_until(lambda: _closed_as_idle(b, sock), timeout_s=20, what="the idle close")
        assert time.monotonic() - sent_at >= IDLE_MS / 1000 * 0.95
        got = _read_until_closed(sock)
    assert b.metric(CLOSED) >= before + 1
    (size,) = struct.unpack(">i", got[:4])
    assert size > records * VALUE
    assert len(got) < 4 + size, "the whole response arrived: the reader was never stalled"
    _produce(b, "after", 10)
    assert len(consume_assigned(b.bootstrap, "after", 0, 10)) == 10


def test_a_client_that_stops_reading_pipelined_answers_is_closed(
    broker_factory: Factory,
) -> None:
    """Answers written through the transport (not from a file) pile up in its buffer and
    the kernel's once the client stops reading; with no progress the connection is closed,
    which frees what the broker holds for it."""
    b = _idle_broker(broker_factory)
    with WireConnection(*b.host_port) as conn:
        assert conn.create_topic("wide", 200)[0] == 0
    schema = request_schema(ApiKey.METADATA, 9)
    assert schema is not None
    body = mk(schema, topics=[{"name": "wide"}], allow_auto_topic_creation=False)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    sock.settimeout(10)
    sock.connect(b.host_port)
    with sock:
        sock.sendall(encode_request(ApiKey.METADATA, 9, 0, "idle-test", body))
        answer = len(recv_frame(sock))
        count = 2 * _kernel_buffering() // answer
        sock.sendall(
            b"".join(
                encode_request(ApiKey.METADATA, 9, i, "idle-test", body)
                for i in range(1, count + 1)
            )
        )
        wait_until(lambda: _closed_as_idle(b, sock), timeout_s=20, what="the idle close")
        got = _read_until_closed(sock)
    assert len(got) < count * (4 + answer), "every answer arrived: the reader never stalled"


def test_a_slow_reader_is_not_closed_while_the_broker_writes_to_it(
    broker_factory: Factory,
) -> None:
    """A client taking a response in small reads 20 ms apart, for longer than the idle
    time, while the broker still has bytes of it to write: each write progresses, so the
    connection is not idle. Once less than the kernel's buffers hold is left, the client
    reads the rest at once and asks again on the same connection. The pauses are the
    client's pace, not a wait for the broker."""
    b = _idle_broker(broker_factory)
    buffered = _kernel_buffering()
    _produce(b, "slow", (buffered + (2 << 20)) // VALUE)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    sock.settimeout(10)
    sock.connect(b.host_port)
    with sock:
        sock.sendall(_fetch_frame("slow", 7, 64 << 20))
        got = bytearray(recv_exact(sock, 4))
        (size,) = struct.unpack(">i", got)
        start = time.monotonic()
        while len(got) < size - buffered:
            chunk = sock.recv(32 << 10)
            assert chunk, f"closed after {len(got)} bytes"
            got += chunk
            time.sleep(0.02)
        slow_for = time.monotonic() - start
        got += recv_exact(sock, 4 + size - len(got))
        corr, response = decode_response(ApiKey.FETCH, 12, bytes(got[4:]))
        assert corr == 7
        assert len(response.responses[0].partitions[0].records) > buffered
        sock.sendall(_api_versions_frame(8))
        assert decode_response(ApiKey.API_VERSIONS, 3, recv_frame(sock))[0] == 8
        assert not _closed_as_idle(b, sock)
    assert slow_for > 1.5 * IDLE_MS / 1000, f"read slowly for {slow_for:.1f}s only"


def test_a_long_poll_fetch_is_not_cut_while_it_waits(broker_factory: Factory) -> None:
    b = _idle_broker(broker_factory)
    before = b.metric(CLOSED)
    with WireConnection(*b.host_port, timeout_s=15) as conn:
        assert conn.create_topic("quiet", 1)[0] == 0
        fields = fetch_fields(
            {"quiet": [fetch_partition(0, 0)]},
            max_bytes=1 << 20,
            max_wait=3 * IDLE_MS,
            min_bytes=1,
        )
        start = time.monotonic()
        r = conn.call(ApiKey.FETCH, 12, **fields)
        waited = time.monotonic() - start
        assert int(r.responses[0].partitions[0].error_code) == 0
        assert not r.responses[0].partitions[0].records
        assert waited >= 3 * IDLE_MS / 1000 * 0.9, f"answered after {waited:.2f}s"
        assert b.metric(CLOSED) == before
        conn.call(ApiKey.API_VERSIONS, 3)  # the connection survived the wait
    assert b.metric(CLOSED) == before


def test_the_sweep_runs_four_times_per_idle_time_within_bounds() -> None:
    assert idle_sweep_interval_ms(600_000) == 30_000  # Kafka's default: 30 s late at most
    assert idle_sweep_interval_ms(IDLE_MS) == IDLE_MS // 4
    assert idle_sweep_interval_ms(1) == 100
