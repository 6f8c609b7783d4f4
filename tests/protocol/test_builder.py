"""``mk``: fits plain values to one schema version, and refuses names no version has."""

from __future__ import annotations

import datetime
from dataclasses import field, make_dataclass

import pytest

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import UnknownFieldError, has_field, mk
from tierlog.protocol.codec import request_schema, response_schema
from tierlog.protocol.errors import ErrorCode


def test_a_name_no_version_has_raises() -> None:
    cls = response_schema(ApiKey.METADATA, 12)
    with pytest.raises(UnknownFieldError, match="throttle_time_ms") as caught:
        mk(cls, throttle_time_ms=0)
    assert caught.value.cls is cls
    assert caught.value.name == "throttle_time_ms"


def test_a_misspelled_nested_field_raises() -> None:
    cls = response_schema(ApiKey.METADATA, 12)
    with pytest.raises(UnknownFieldError, match="partiton_index"):
        mk(cls, topics=[{"name": "t", "partitions": [{"partiton_index": 0}]}])


def test_a_misspelled_request_field_raises() -> None:
    cls = request_schema(ApiKey.LIST_OFFSETS, 9)
    assert cls is not None
    with pytest.raises(UnknownFieldError, match="isolation"):
        mk(cls, replica_id=-1, isolation=0)


def test_fields_of_newer_versions_are_dropped_from_older_ones() -> None:
    old = response_schema(ApiKey.METADATA, 0)
    assert not has_field(old, "throttle_time")
    assert not has_field(old, "cluster_id")
    body = mk(
        old,
        throttle_time=5,
        cluster_id="c",
        topics=[{"name": "t", "topic_id": None, "is_internal": False}],
    )
    assert body.topics[0].name == "t"


def test_fields_of_older_versions_are_dropped_from_newer_ones() -> None:
    # FindCoordinator v4 answers per key; the single-key fields of v0-v3 are gone from it
    cls = response_schema(ApiKey.FIND_COORDINATOR, 4)
    assert not has_field(cls, "node_id")
    body = mk(cls, node_id=1, coordinators=[{"key": "g", "node_id": 1}])
    assert body.coordinators[0].node_id == 1


def test_fields_of_versions_beyond_those_advertised_are_known() -> None:
    # Metadata's top-level error_code exists from v13, above the v12 we serve
    cls = response_schema(ApiKey.METADATA, 12)
    assert not has_field(cls, "error_code")
    mk(cls, error_code=ErrorCode.NONE)


def test_given_values_are_converted_and_missing_ones_zeroed() -> None:
    cls = response_schema(ApiKey.JOIN_GROUP, 9)
    body = mk(cls, throttle_time=7, error_code=ErrorCode.REBALANCE_IN_PROGRESS, member_id="m")
    assert body.throttle_time == datetime.timedelta(milliseconds=7)
    assert int(body.error_code) == ErrorCode.REBALANCE_IN_PROGRESS
    assert body.member_id == "m"
    assert body.leader == ""
    assert body.members == ()


def test_a_class_outside_kio_knows_only_its_own_fields() -> None:
    not_kio = make_dataclass(
        "NotKio", [("size", int, field(metadata={"kafka_type": "int32"}))], frozen=True
    )
    assert mk(not_kio, size=3).size == 3
    with pytest.raises(UnknownFieldError, match="colour"):
        mk(not_kio, size=3, colour=1)
