"""``max.connections.per.ip`` on a real broker: a connection over the limit is closed right
after the accept, the connections already open keep being served, the refusal is counted in
``tierlog_connections_refused_total``, and a closed connection frees its slot."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

from kio.schema.api_versions.v0.response import ApiVersionsResponse

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.wire import connection_closed, frame, raw_connection, recv_frame
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.codec import decode_response

REFUSED = "tierlog_connections_refused_total"


def _api_versions(sock: socket.socket, correlation_id: int) -> int:
    """ApiVersions v0 over a raw socket; returns the answer's error code."""
    sock.sendall(frame(struct.pack(">hhih", int(ApiKey.API_VERSIONS), 0, correlation_id, 1) + b"t"))
    corr, body = decode_response(ApiKey.API_VERSIONS, 0, recv_frame(sock))
    assert corr == correlation_id
    assert isinstance(body, ApiVersionsResponse)
    return int(body.error_code)


def test_third_connection_from_one_ip_is_closed(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory({"max.connections.per.ip": "2"})
    first = raw_connection(b.host_port)
    second = raw_connection(b.host_port)
    try:
        # Answers prove both were admitted before the third arrives.
        assert _api_versions(first, 1) == 0
        assert _api_versions(second, 1) == 0
        assert b.metric(REFUSED, reason="max_connections_per_ip") == 0

        third = raw_connection(b.host_port)
        assert connection_closed(third)
        third.close()
        wait_until(
            lambda: b.metric(REFUSED, reason="max_connections_per_ip") >= 1,
            timeout_s=10,
            what="the refusal counted",
        )
        assert b.metric(REFUSED, reason="max_connections") == 0

        assert _api_versions(first, 2) == 0
        assert _api_versions(second, 2) == 0

        second.close()

        def replacement_served() -> bool:
            """The broker sees the close asynchronously: a new connection may still be
            refused for a moment, and is admitted once the slot is free."""
            s = raw_connection(b.host_port)
            try:
                return _api_versions(s, 3) == 0
            except (AssertionError, ConnectionError):
                return False
            finally:
                s.close()

        wait_until(replacement_served, timeout_s=10, what="a freed slot admitted")
        assert _api_versions(first, 4) == 0
    finally:
        first.close()
        second.close()


def test_broker_wide_creation_rate_holds_connections_then_serves_them(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """``max.connection.creation.rate`` (KIP-612, broker-wide): connections opened faster
    than the rate are held unread, as behind Kafka's blocked acceptor, and then served;
    none is closed, and the held time is counted."""
    b = broker_factory(
        {
            "max.connection.creation.rate": "2",
            "quota.window.num": "2",
            "quota.window.size.seconds": "1",
        }
    )
    held = "tierlog_connection_accept_throttle_seconds_total"
    socks = [raw_connection(b.host_port) for _ in range(5)]
    try:
        for i, s in enumerate(socks):
            s.settimeout(30)
            assert _api_versions(s, i) == 0, f"connection {i} served"
        assert b.metric(held) >= 1.0, "the later connections were held"
        assert b.metric(REFUSED, reason="max_connection_creation_rate") == 0
    finally:
        for s in socks:
            s.close()
