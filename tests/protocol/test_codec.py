"""Request/response encoding and decoding (protocol.codec): every advertised version round
trips; unknown schemas keep the correlation id. Plain bytes, no sockets."""

from __future__ import annotations

import struct
import uuid

import pytest

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import has_field, mk
from tierlog.protocol.codec import (
    MalformedRequest,
    UnknownRequestSchema,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_schema,
    response_schema,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.versions import ADVERTISED

ALL_VERSIONS = [(k, v) for k, (lo, hi) in sorted(ADVERTISED.items()) for v in range(lo, hi + 1)]


@pytest.mark.parametrize(("api_key", "version"), ALL_VERSIONS)
def test_every_advertised_request_round_trips(api_key: int, version: int) -> None:
    cls = request_schema(api_key, version)
    assert cls is not None
    body = mk(cls)
    wire = encode_request(api_key, version, 1234, "client-x", body)
    req = decode_request(wire[4:])
    assert (req.header.api_key, req.header.api_version) == (api_key, version)
    assert req.header.correlation_id == 1234
    assert req.header.client_id == "client-x"
    assert req.body == body


@pytest.mark.parametrize(("api_key", "version"), ALL_VERSIONS)
def test_every_advertised_response_encodes_from_defaults(api_key: int, version: int) -> None:
    cls = response_schema(api_key, version)
    given = {"throttle_time": 5, "error_code": ErrorCode.NOT_COORDINATOR}
    body = mk(cls, **{name: value for name, value in given.items() if has_field(cls, name)})
    wire = encode_response(api_key, version, 77, body)
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    corr, back = decode_response(api_key, version, wire[4:])
    assert corr == 77
    assert back == body


def test_metadata_round_trip_with_nested_dicts() -> None:
    tid = uuid.uuid4()
    for version in (1, 9, 12):
        cls = response_schema(ApiKey.METADATA, version)
        body = mk(
            cls,
            brokers=[{"node_id": 0, "host": "h", "port": 9092, "rack": None}],
            cluster_id="c",
            controller_id=0,
            topics=[
                {
                    "error_code": 0,
                    "name": "t",
                    "topic_id": tid,
                    "is_internal": False,
                    "partitions": [{"partition_index": 0, "leader_id": 0, "replica_nodes": [0]}],
                }
            ],
        )
        _, back = decode_response(
            ApiKey.METADATA, version, encode_response(ApiKey.METADATA, version, 1, body)[4:]
        )
        assert back.topics[0].name == "t"
        assert back.topics[0].partitions[0].replica_nodes == (0,)
        assert has_field(type(back.topics[0]), "topic_id") == (version >= 10)


def test_unknown_schema_keeps_correlation_id() -> None:
    with pytest.raises(UnknownRequestSchema) as e:
        decode_request(struct.pack(">hhih", 18, 99, 31337, -1))
    assert e.value.correlation_id == 31337
    with pytest.raises(MalformedRequest):
        decode_request(b"\x00\x03")
