"""Raw wire-protocol access for tests: arbitrary bytes on a socket (typed requests go through
``tierlog.client.WireConnection``), the fields of hand-built Fetch requests, the records
of a Fetch response, and ListOffsets' special timestamps."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_request, request_schema
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches

__all__ = [
    "EARLIEST",
    "EARLIEST_LOCAL",
    "LATEST",
    "LATEST_TIERED",
    "connection_closed",
    "fetch_fields",
    "fetch_partition",
    "frame",
    "offsets_and_values",
    "produce_request",
    "raw_connection",
    "recv_exact",
    "recv_frame",
]

#: ListOffsets' special timestamps (KIP-405 added the last two, in versions 8 and 9).
LATEST, EARLIEST, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -4, -5


def raw_connection(host_port: tuple[str, int], timeout_s: float = 10.0) -> socket.socket:
    return socket.create_connection(host_port, timeout=timeout_s)


def connection_closed(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    """True if the peer closes the connection (EOF or reset) within the timeout."""
    sock.settimeout(timeout_s)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then released): a broker that
    cannot be reached."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``; fails if the peer closes first. Each ``recv`` asks for at
    most 1 MiB, since Python allocates what it asks for."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        assert chunk, f"connection closed after {len(buf)} of {n} bytes"
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame from ``sock``, without its size."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def fetch_partition(partition: int, offset: int, max_bytes: int = 1 << 20) -> dict[str, int]:
    """One partition of a Fetch v12 request as a consumer sends it: no leader epoch, no log
    start offset, no last fetched epoch (-1 each)."""
    return {
        "partition": partition,
        "fetch_offset": offset,
        "partition_max_bytes": max_bytes,
        "current_leader_epoch": -1,
        "log_start_offset": -1,
        "last_fetched_epoch": -1,
    }


def fetch_fields(
    topics: Mapping[str, Sequence[Mapping[str, int]]],
    *,
    max_bytes: int,
    max_wait: int = 0,
    min_bytes: int = 0,
    replica_id: int = -1,
) -> dict[str, Any]:
    """The fields of a sessionless, read-uncommitted Fetch v12 request of ``topics`` (name ->
    ``fetch_partition`` entries): ``WireConnection.call(ApiKey.FETCH, 12, **fields)``, or
    ``mk(request_schema(ApiKey.FETCH, 12), **fields)`` to encode it by hand."""
    return {
        "replica_id": replica_id,
        "max_wait": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "partitions": list(ps)} for t, ps in topics.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def offsets_and_values(records: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of ``records``, the whole batches of a Fetch response."""
    return [
        (r.offset, r.value)
        for h in scan_batches(records)
        for r in iter_records(records[h.position : h.end])
    ]


def produce_request(topic: str, value_bytes: int, correlation_id: int, client_id: str) -> bytes:
    """A whole Produce v9 request (size prefix included) of one record of ``value_bytes`` to
    partition 0 of ``topic``, acks=1: to send raw, pipelined or on a muted connection."""
    records = build_batch([SimpleRecord(b"v" * value_bytes)], timestamp=int(time.time() * 1000))
    schema = request_schema(ApiKey.PRODUCE, 9)
    assert schema is not None
    body = mk(
        schema,
        transactional_id=None,
        acks=1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )
    return encode_request(ApiKey.PRODUCE, 9, correlation_id, client_id, body)
