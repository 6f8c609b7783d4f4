"""``queued.max.request.bytes``: the broker-wide bound on requests read but not yet handled.

Unit rules of ``tierlog.server.request_memory.QueuedRequestBytes``, Kafka's start-up rule
against ``socket.request.max.bytes``, and a real broker: one connection whose long-polling
Fetch holds three large Produce requests queued behind it takes the count over the bound,
so another connection is served the request it had sent and reads its next one only once
the Fetch has answered and the queue has drained."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from tests.helpers.broker import BrokerProcess, serve_to_exit
from tests.helpers.poll import wait_until
from tests.helpers.wire import frame, produce_request, raw_connection, recv_frame
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_request, request_schema
from tierlog.server.request_memory import QueuedRequestBytes

MIB = 1 << 20


def test_count_bounds_and_wakes_every_waiting_connection() -> None:
    q = QueuedRequestBytes(100)
    woken: list[str] = []
    assert not q.add(60)
    assert q.add(60), "over the bound"
    q.wait("a", lambda: woken.append("a"))
    q.wait("b", lambda: woken.append("b"))
    q.wait("c", lambda: woken.append("c"))
    q.forget("c")
    q.remove(10)
    assert woken == [], "110 is still over"
    q.remove(10)
    assert sorted(woken) == ["a", "b"]
    q.remove(10**6)
    assert q.used == 0
    unbounded = QueuedRequestBytes(-1)
    assert not unbounded.add(10**12) and unbounded.used == 0


def test_a_bound_below_the_largest_request_stops_the_start(tmp_path: Path) -> None:
    done = serve_to_exit(
        tmp_path, {"queued.max.request.bytes": "1000", "socket.request.max.bytes": "2000"}
    )
    assert done.returncode != 0
    assert "queued.max.request.bytes" in done.stderr


def _long_poll(topic: str, wait_ms: int) -> bytes:
    schema = request_schema(ApiKey.FETCH, 4)
    assert schema is not None
    body = mk(
        schema,
        replica_id=-1,
        max_wait=wait_ms,
        min_bytes=1,
        max_bytes=MIB,
        isolation_level=0,
        topics=[
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": MIB}],
            }
        ],
    )
    return encode_request(ApiKey.FETCH, 4, 1, "poller", body)


def _api_versions(sock: socket.socket, correlation_id: int) -> None:
    sock.sendall(frame(struct.pack(">hhih", int(ApiKey.API_VERSIONS), 0, correlation_id, 1) + b"t"))
    recv_frame(sock)


def test_a_full_queue_stops_other_connections_until_it_drains(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory({"queued.max.request.bytes": str(MIB), "socket.request.max.bytes": str(MIB)})
    with WireConnection(*b.host_port) as conn:
        assert conn.create_topic("empty", 1)[0] == 0
        assert conn.create_topic("sink", 1)[0] == 0
    other = raw_connection(b.host_port, timeout_s=30)
    loader = raw_connection(b.host_port, timeout_s=30)
    try:
        _api_versions(other, 1)
        wait_ms = 4000
        loader.sendall(_long_poll("empty", wait_ms))
        polled_at = time.monotonic()
        for i in range(3):
            loader.sendall(produce_request("sink", 400_000, 10 + i, "loader"))
        wait_until(
            lambda: b.metric("tierlog_queued_request_bytes") > MIB,
            timeout_s=wait_ms / 2000,
            what="the three Produce requests queued behind the Fetch",
        )
        _api_versions(other, 2)  # queued while over the bound: served, but stops its reads
        other.sendall(frame(struct.pack(">hhih", int(ApiKey.API_VERSIONS), 0, 3, 1) + b"t"))
        recv_frame(other)
        answered_after = time.monotonic() - polled_at
        assert answered_after >= wait_ms / 1000 * 0.9, (
            f"the next request was read only once the Fetch answered ({answered_after:.2f} s)"
        )
        for _ in range(4):
            recv_frame(loader)
        wait_until(
            lambda: b.metric("tierlog_queued_request_bytes") == 0,
            timeout_s=10,
            what="the count back to zero",
        )
    finally:
        other.close()
        loader.close()
