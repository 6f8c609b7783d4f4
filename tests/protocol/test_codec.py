"""Sans-IO protocol layer: framing, request/response round trips, KIP-511, bounds guard,
the version-agnostic builder and the zero-copy Fetch encoder. Plain bytes, no sockets."""

from __future__ import annotations

import re
import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0

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
from tierlog.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from tierlog.protocol.framing import FrameError, FrameSplitter, frame
from tierlog.protocol.guard import FrameBoundsError, check_request_frame
from tierlog.protocol.versions import ADVERTISED, api_versions_fallback

ALL_VERSIONS = [(k, v) for k, (lo, hi) in sorted(ADVERTISED.items()) for v in range(lo, hi + 1)]


# ---- framing ------------------------------------------------------------------------------
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(1, 64), min_size=1, max_size=20),
)
def test_frame_splitter_reassembles_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    splitter = FrameSplitter(1000)
    got: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got += splitter.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert got == payloads
    assert splitter.buffered == 0


def test_frame_splitter_rejects_oversized_before_buffering_body() -> None:
    splitter = FrameSplitter(100)
    assert splitter.feed(struct.pack(">i", 100) + b"x" * 100) == [b"x" * 100]
    with pytest.raises(FrameError, match=re.escape("exceeds socket.request.max.bytes=100")):
        splitter.feed(struct.pack(">i", 101))
    with pytest.raises(FrameError, match="negative"):
        FrameSplitter(100).feed(struct.pack(">i", -1))


# ---- request/response round trips -----------------------------------------------------------
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


def test_kip511_fallback_is_v0_with_unsupported_version_and_ranges() -> None:
    wire = api_versions_fallback(55)
    corr, body = decode_response(ApiKey.API_VERSIONS, 0, wire[4:])
    assert corr == 55
    assert isinstance(body, ApiVersionsV0)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    got = {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}
    assert got == ADVERTISED


def test_advertised_ranges_cover_the_reference_clients() -> None:
    # versions observed in spec/python-kafka-feasibility.md §4
    used = {
        "kcat": {18: 3, 3: 4, 0: 7, 2: 2, 1: 11, 10: 2, 11: 5, 14: 3, 12: 3, 8: 7, 13: 1},
        "confluent": {18: 3, 3: 12, 0: 10, 22: 4, 2: 7, 1: 16, 9: 9, 8: 9},
        "kafka-python": {18: 4, 3: 12, 22: 4, 0: 9, 2: 10, 1: 12, 10: 5, 11: 7, 14: 5, 9: 8},
        "aiokafka": {18: 0, 3: 5, 0: 7, 2: 3, 1: 11, 10: 1, 11: 5, 14: 3, 9: 3, 8: 3, 13: 1},
    }
    for client, apis in used.items():
        for key, version in apis.items():
            lo, hi = ADVERTISED[key]
            assert lo <= version <= hi, (client, key, version)


# ---- guard ------------------------------------------------------------------------------------
def test_guard_rejects_array_count_beyond_frame() -> None:
    cls = request_schema(ApiKey.METADATA, 4)
    assert cls is not None
    # Metadata v4: header v1 then topics array count 2**31-1 and nothing else
    frame_ = struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(FrameBoundsError, match="elements"):
        check_request_frame(cls, frame_)
    with pytest.raises(MalformedRequest):
        decode_request(frame_)


def test_guard_rejects_null_for_non_nullable_array() -> None:
    cls = request_schema(ApiKey.ALTER_CONFIGS, 1)  # AlterConfigs: resources is not nullable
    assert cls is not None
    frame_ = struct.pack(">hhih", 33, 1, 1, -1) + struct.pack(">i", -1) + b"\x00"
    with pytest.raises(FrameBoundsError, match="non-nullable"):
        check_request_frame(cls, frame_)


@pytest.mark.parametrize(("api_key", "version"), ALL_VERSIONS)
def test_guard_accepts_every_valid_request(api_key: int, version: int) -> None:
    cls = request_schema(api_key, version)
    assert cls is not None
    check_request_frame(cls, encode_request(api_key, version, 1, None, mk(cls))[4:])


# ---- Fetch response encoder ---------------------------------------------------------------------
@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_response_matches_kio_decoding(version: int) -> None:
    tid = uuid.uuid4()
    records = [b"\x01" * 10, memoryview(b"\x02" * 7)]
    topics = [
        FetchTopic(
            "topic-a",
            tid,
            [
                FetchPartition(0, 0, 100, 90, 5, None, -1, records, 17),
                FetchPartition(1, int(ErrorCode.OFFSET_OUT_OF_RANGE), 3, 3, 0, [(9, 4)]),
            ],
        )
    ]
    buffers, size = encode_fetch_response(version, 99, topics, session_id=0)
    wire = b"".join(bytes(b) for b in buffers)
    assert len(wire) == size
    assert any(b is records[1] for b in buffers)  # the record memoryview is not copied
    corr, body = decode_response(ApiKey.FETCH, version, wire[4:])
    assert corr == 99
    t = body.responses[0]
    if version >= 13:
        assert t.topic_id == tid
    else:
        assert t.topic == "topic-a"
    p0, p1 = t.partitions
    assert (p0.high_watermark, p0.last_stable_offset) == (100, 90)
    assert p0.records == b"\x01" * 10 + b"\x02" * 7
    if version >= 5:
        assert p0.log_start_offset == 5
    assert p1.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert [(a.producer_id, a.first_offset) for a in p1.aborted_transactions] == [(9, 4)]
    assert not p1.records
