"""Hypothesis fuzzing of the request decoder through a real broker.

For every advertised API key: random bodies behind a valid header, truncated and bit-flipped
encodings of a valid request, and frames declaring more than ``socket.request.max.bytes``.
After every example the broker must still be alive and must still answer a well-behaved
client on a connection it had open all along.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.broker import BrokerProcess
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_request, request_schema
from tierlog.protocol.versions import ADVERTISED

MAX_FRAME = 65536
# Admin APIs whose valid-but-random requests could create thousands of partitions; their
# decoders still get random and truncated bodies.
_NO_FLIPS = {19, 37}

API_VERSIONS = [(k, v) for k, (lo, hi) in sorted(ADVERTISED.items()) for v in range(lo, hi + 1)]


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("fuzz-broker"), {"socket.request.max.bytes": str(MAX_FRAME)}
    )
    b.start()
    yield b
    b.close()


@pytest.fixture(scope="module")
def witness(fuzz_broker: BrokerProcess) -> Iterator[WireConnection]:
    """A connection opened before the fuzzing starts and used after every example."""
    c = WireConnection.to_bootstrap(fuzz_broker.bootstrap)
    yield c
    c.close()


def _header(api_key: int, version: int, corr: int = 1) -> bytes:
    cls = request_schema(api_key, version)
    assert cls is not None
    flexible = cls.__header_schema__.__version__ >= 2
    return struct.pack(">hhih", api_key, version, corr, 1) + b"z" + (b"\x00" if flexible else b"")


def _valid_request(api_key: int, version: int) -> bytes:
    cls = request_schema(api_key, version)
    assert cls is not None
    return encode_request(api_key, version, 7, "fuzz", mk(cls))


def _send(b: BrokerProcess, data: bytes) -> None:
    """Send and give the broker a moment to react; the verdict comes from the witness."""
    with socket.create_connection(b.host_port, timeout=5) as s:
        try:
            s.sendall(data)
            s.settimeout(0.05)
            s.recv(65536)
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            pass


def _still_serving(b: BrokerProcess, witness: WireConnection) -> None:
    assert b.running, b.stderr[-3000:]
    r = witness.call(
        ApiKey.API_VERSIONS, 3, client_software_name="witness", client_software_version="1"
    )
    assert int(r.error_code) == 0


_fuzz_settings = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_fuzz_settings
@given(api=st.sampled_from(API_VERSIONS), body=st.binary(max_size=256))
def test_random_bodies(
    fuzz_broker: BrokerProcess, witness: WireConnection, api: tuple[int, int], body: bytes
) -> None:
    payload = _header(*api) + body
    _send(fuzz_broker, struct.pack(">i", len(payload)) + payload)
    _still_serving(fuzz_broker, witness)


@_fuzz_settings
@given(api=st.sampled_from(API_VERSIONS), data=st.data())
def test_truncated_and_flipped_requests(
    fuzz_broker: BrokerProcess, witness: WireConnection, api: tuple[int, int], data: st.DataObject
) -> None:
    full = _valid_request(*api)
    payload = full[4:]
    cut = data.draw(st.integers(0, len(payload)), label="cut")
    if api[0] not in _NO_FLIPS and data.draw(st.booleans(), label="flip"):
        pos = data.draw(st.integers(0, len(payload) - 1), label="pos")
        bit = data.draw(st.integers(0, 7), label="bit")
        payload = payload[:pos] + bytes([payload[pos] ^ (1 << bit)]) + payload[pos + 1 :]
    else:
        payload = payload[:cut]
    _send(fuzz_broker, struct.pack(">i", len(payload)) + payload)
    _still_serving(fuzz_broker, witness)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    api=st.sampled_from(API_VERSIONS),
    declared=st.one_of(st.integers(MAX_FRAME + 1, 2**31 - 1), st.integers(-(2**31), -1)),
)
def test_oversized_and_negative_sizes(
    fuzz_broker: BrokerProcess, witness: WireConnection, api: tuple[int, int], declared: int
) -> None:
    _send(fuzz_broker, struct.pack(">i", declared) + _header(*api))
    _still_serving(fuzz_broker, witness)


def test_fuzzing_left_the_broker_healthy(
    fuzz_broker: BrokerProcess, witness: WireConnection
) -> None:
    """Runs last in this module: a fresh client still works and nothing crashed."""
    _still_serving(fuzz_broker, witness)
    with WireConnection.to_bootstrap(fuzz_broker.bootstrap) as fresh:
        md = fresh.call(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False)
        assert md.brokers[0].port == fuzz_broker.host_port[1]
    assert "Traceback" not in fuzz_broker.stderr
