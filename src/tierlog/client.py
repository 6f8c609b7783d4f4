"""A minimal blocking Kafka wire client: one connection, one request in flight.

The CLI's admin commands, ``tierlog remote segments`` and the Spark source all need to
speak the protocol from plain threads (no event loop) and to see raw record batches that
librdkafka-based clients never hand out. They share this one connection type, built on the
same sans-IO codec as the broker (``tierlog.protocol``).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import decode_response, encode_request, request_schema
from tierlog.protocol.fetch_request import fetch_fields

_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """One ListOffsets answer: Kafka's error code, offset, leader epoch and timestamp."""

    error_code: int
    offset: int
    leader_epoch: int
    timestamp: int


class WireError(RuntimeError):
    """The broker answered out of protocol (e.g. a correlation id that is not ours)."""


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` into addresses; a bare ``:port`` means localhost."""
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    return out


class WireConnection:
    """Not thread-safe: one per thread (Kafka answers a connection's requests in order)."""

    def __init__(
        self, host: str, port: int, *, timeout_s: float = 30.0, client_id: str = "tierlog"
    ) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client_id = client_id
        self._corr = 0

    @classmethod
    def to_bootstrap(cls, bootstrap: str, **kw: Any) -> WireConnection:
        """Connect to the first address of a bootstrap list."""
        host, port = parse_bootstrap(bootstrap)[0]
        return cls(host, port, **kw)

    def request(self, api_key: ApiKey, version: int, body: Any) -> Any:
        """Send a built kio request entity and return the decoded response entity."""
        self._corr += 1
        self._sock.sendall(encode_request(api_key, version, self._corr, self._client_id, body))
        (size,) = _SIZE.unpack(self._recv(4))
        corr, response = decode_response(api_key, version, self._recv(size))
        if corr != self._corr:
            raise WireError(f"correlation id {corr}, expected {self._corr}")
        return response

    def call(self, api_key: ApiKey, version: int, **fields: Any) -> Any:
        """Like ``request``, building the body from fields (missing ones get Kafka's zeros)."""
        cls = request_schema(api_key, version)
        if cls is None:
            raise WireError(f"no request schema for {api_key.kafka_name} v{version}")
        return self.request(api_key, version, mk(cls, **fields))

    def list_offsets(
        self, topic: str, partitions: Sequence[int], timestamp: int, *, version: int = 9
    ) -> dict[int, ListedOffset]:
        """One ListOffsets request for ``partitions`` of ``topic``, the same ``timestamp`` for
        each (-1 latest, -2 earliest, -3 max timestamp, -4 earliest local, -5 latest tiered,
        or a timestamp): each partition's answer. v9 is the lowest version that knows -5."""
        r = self.call(
            ApiKey.LIST_OFFSETS,
            version,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                        for p in partitions
                    ],
                }
            ],
        )
        return {
            int(p.partition_index): ListedOffset(
                int(p.error_code), int(p.offset), int(p.leader_epoch), int(p.timestamp)
            )
            for p in r.topics[0].partitions
        }

    def list_offset(
        self, topic: str, partition: int, timestamp: int, *, version: int = 9
    ) -> ListedOffset:
        """``list_offsets`` for one partition."""
        return self.list_offsets(topic, [partition], timestamp, version=version)[partition]

    def fetch_raw(
        self, topic: str, partition: int, offset: int, max_bytes: int = 4 << 20
    ) -> tuple[int, bytes]:
        """One sessionless Fetch v12 (no wait) of one partition: (error code, raw batches).

        Tools need the record batches themselves (control batches included), which stock
        clients never hand out."""
        r = self.call(ApiKey.FETCH, 12, **fetch_fields(topic, partition, offset, max_bytes))
        p = r.responses[0].partitions[0]
        return int(p.error_code), bytes(p.records or b"")

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        replication_factor: int = 1,
        validate_only: bool = False,
    ) -> tuple[int, str | None]:
        """CreateTopics v5 for one topic; returns (error code, error message)."""
        r = self.call(
            ApiKey.CREATE_TOPICS,
            5,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            timeout=30_000,
            validate_only=validate_only,
        )
        t = r.topics[0]
        return int(t.error_code), t.error_message

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("broker closed the connection")
            got += k
        return bytes(buf)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BrokerConnections:
    """Connections to the brokers a Metadata response names, opened on first use and closed
    together. A cluster answers ListOffsets and Fetch on a partition's leader only, so a
    tool reading several partitions keeps one connection per leader; a broker the metadata
    does not name is reached through the bootstrap connection, which this does not close."""

    def __init__(self, bootstrap: WireConnection, metadata: Any, client_id: str) -> None:
        self.bootstrap = bootstrap
        self._addresses = {int(b.node_id): (str(b.host), int(b.port)) for b in metadata.brokers}
        self._client_id = client_id
        self._open: dict[int, WireConnection] = {}

    def knows(self, node_id: int) -> bool:
        return node_id in self._addresses

    def to(self, node_id: int) -> WireConnection:
        if node_id not in self._addresses:
            return self.bootstrap
        conn = self._open.get(node_id)
        if conn is None:
            conn = self._open[node_id] = WireConnection(
                *self._addresses[node_id], client_id=self._client_id
            )
        return conn

    def close(self) -> None:
        for conn in self._open.values():
            conn.close()
        self._open.clear()
