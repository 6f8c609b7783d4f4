"""Hostile and unusual input: bad frames close only their own connection; versions and
APIs we do not serve get Kafka's answers; SIGTERM shuts down cleanly."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0

from tests.helpers.broker import BrokerProcess
from tests.helpers.wire import connection_closed, frame, raw_connection, recv_frame
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.codec import decode_response, encode_request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.versions import ADVERTISED


def _api_versions_ok(b: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        r = c.call(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        assert int(r.error_code) == 0


def test_malformed_frame_closes_only_that_connection(broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(broker.bootstrap) as good:
        bad = raw_connection(broker.host_port)
        # a Metadata v12 header followed by a body that cannot parse
        bad.sendall(frame(b"\x00\x03\x00\x0c\x00\x00\x00\x07\x00\x01x\x00\xff\xff\xff"))
        assert connection_closed(bad)
        r = good.call(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False)
        assert r.brokers[0].port == broker.host_port[1]
    assert "malformed request" in broker.stderr


def test_oversized_frame_closes_only_that_connection(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory({"socket.request.max.bytes": "4096"})
    with WireConnection.to_bootstrap(b.bootstrap) as good:
        bad = raw_connection(b.host_port)
        bad.sendall(struct.pack(">i", 4097) + b"\x00" * 64)  # declared size is enough
        assert connection_closed(bad)
        neg = raw_connection(b.host_port)
        neg.sendall(struct.pack(">i", -5))
        assert connection_closed(neg)
        r = good.call(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        assert int(r.error_code) == 0
    assert "exceeds socket.request.max.bytes=4096" in b.stderr


def test_unknown_api_versions_version_gets_kip511_fallback(module_broker: BrokerProcess) -> None:
    sock = raw_connection(module_broker.host_port)
    # ApiVersions v99: header v2 layout (key, version, correlation id, client id, tags) + junk
    sock.sendall(frame(struct.pack(">hhih", 18, 99, 4242, 1) + b"c" + b"\x00" + b"\x05junk"))
    payload = recv_frame(sock)
    corr, body = decode_response(ApiKey.API_VERSIONS, 0, payload)
    assert isinstance(body, ApiVersionsV0)
    assert corr == 4242
    assert int(body.error_code) == ErrorCode.UNSUPPORTED_VERSION
    ranges = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in body.api_keys}
    assert ranges == ADVERTISED


def test_unsupported_api_gets_error_and_unknown_api_closes(module_broker: BrokerProcess) -> None:
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    sock = raw_connection(module_broker.host_port)
    sock.sendall(
        encode_request(ApiKey.SASL_HANDSHAKE, 1, 9, "t", SaslHandshakeRequest(mechanism="PLAIN"))
    )
    corr, body = decode_response(ApiKey.SASL_HANDSHAKE, 1, recv_frame(sock))
    assert corr == 9
    assert int(body.error_code) == ErrorCode.UNSUPPORTED_VERSION
    # Produce v2 is below kio's (and Kafka 4's) minimum: nothing can describe a reply
    old = raw_connection(module_broker.host_port)
    old.sendall(frame(struct.pack(">hhih", 0, 2, 1, -1) + b"\x00" * 16))
    assert connection_closed(old)
    # LeaderAndIsr (4) is an inter-broker API that no client may send
    inter = raw_connection(module_broker.host_port)
    inter.sendall(frame(struct.pack(">hhih", 4, 0, 1, -1) + b"\x00" * 16))
    assert connection_closed(inter)
    _api_versions_ok(module_broker)


def test_sigterm_writes_clean_shutdown_marker(broker: BrokerProcess) -> None:
    marker = Path(broker.log_dir) / ".kafka_cleanshutdown"
    assert not marker.exists()  # removed while running, so a crash leaves none
    with WireConnection.to_bootstrap(broker.bootstrap) as c:
        r = c.call(
            ApiKey.CREATE_TOPICS,
            7,
            topics=[
                {"name": "sigterm-t", "num_partitions": 1, "replication_factor": 1, "configs": []}
            ],
            timeout=10_000,
            validate_only=False,
        )
        assert int(r.topics[0].error_code) == 0
    assert broker.stop() == 0
    assert marker.exists()
    assert (Path(broker.log_dir) / "recovery-point-offset-checkpoint").exists()
    assert "shutdown complete" in broker.stderr


def test_kill_leaves_no_marker_and_restart_keeps_topics(broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(broker.bootstrap) as c:
        r = c.call(
            ApiKey.CREATE_TOPICS,
            7,
            topics=[
                {"name": "crash-t", "num_partitions": 2, "replication_factor": 1, "configs": []}
            ],
            timeout=10_000,
            validate_only=False,
        )
        assert int(r.topics[0].error_code) == 0
        topic_id = r.topics[0].topic_id
    broker.kill()
    assert not (Path(broker.log_dir) / ".kafka_cleanshutdown").exists()
    broker.start()
    with WireConnection.to_bootstrap(broker.bootstrap) as c:
        md = c.call(
            ApiKey.METADATA, 12, topics=[{"name": "crash-t"}], allow_auto_topic_creation=False
        )
        assert int(md.topics[0].error_code) == 0
        assert md.topics[0].topic_id == topic_id
        assert len(md.topics[0].partitions) == 2
