"""Advertised API versions and the KIP-511 fallback (protocol.versions)."""

from __future__ import annotations

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.codec import decode_response
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.versions import ADVERTISED, api_versions_fallback


def test_kip511_fallback_is_v0_with_unsupported_version_and_ranges() -> None:
    wire = api_versions_fallback(55)
    corr, body = decode_response(ApiKey.API_VERSIONS, 0, wire[4:])
    assert corr == 55
    assert isinstance(body, ApiVersionsV0)
    assert int(body.error_code) == ErrorCode.UNSUPPORTED_VERSION
    got: dict[int, tuple[int, int]] = {
        a.api_key: (a.min_version, a.max_version) for a in body.api_keys
    }
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
            lo, hi = ADVERTISED[ApiKey(key)]
            assert lo <= version <= hi, (client, key, version)
