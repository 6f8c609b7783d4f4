"""The request bounds guard (protocol.guard): counts and nulls checked against the frame
before kio decodes it."""

from __future__ import annotations

import struct

import pytest

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import (
    MalformedRequest,
    decode_request,
    encode_request,
    request_schema,
)
from tierlog.protocol.guard import FrameBoundsError, check_request_frame
from tierlog.protocol.versions import ADVERTISED

ALL_VERSIONS = [(k, v) for k, (lo, hi) in sorted(ADVERTISED.items()) for v in range(lo, hi + 1)]


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
