"""The zero-copy Fetch response encoder (protocol.fetch_response) against kio's decoding."""

from __future__ import annotations

import uuid

import pytest

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.codec import decode_response
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_response_matches_kio_decoding(version: int) -> None:
    tid = uuid.uuid4()
    records: list[bytes | memoryview] = [b"\x01" * 10, memoryview(b"\x02" * 7)]
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


@pytest.mark.parametrize("version", range(12, 18))
def test_diverging_epoch_is_tagged_field_zero(version: int) -> None:
    """A diverged follower's partition carries ``diverging_epoch`` (tag 0, flexible versions)
    as kio reads it; its neighbours keep the default (-1, -1)."""
    diverged = FetchPartition(0, 0, 7, 7, 0, diverging_epoch=(2, 5))
    records: list[bytes | memoryview] = [b"\x03" * 4]
    plain = FetchPartition(1, 0, 9, 9, 0, None, -1, records, 4)
    buffers, size = encode_fetch_response(
        version, 1, [FetchTopic("t", uuid.uuid4(), [diverged, plain])]
    )
    wire = b"".join(bytes(b) for b in buffers)
    assert len(wire) == size
    _, body = decode_response(ApiKey.FETCH, version, wire[4:])
    p0, p1 = body.responses[0].partitions
    assert (p0.diverging_epoch.epoch, p0.diverging_epoch.end_offset) == (2, 5)
    assert not p0.records
    assert (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset) == (-1, -1)
    assert p1.records == b"\x03" * 4
