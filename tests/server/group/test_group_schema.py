"""__consumer_offsets record formats and the group -> partition mapping, against Kafka's."""

from __future__ import annotations

import struct

import pytest

from tierlog.server.group.model import TopicPartition
from tierlog.server.group.schema import (
    CommittedOffset,
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetKey,
    SchemaError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    offset_key,
    offset_value,
    partition_for,
)


# Values printed by OpenJDK 17's String.hashCode() for these exact strings.
@pytest.mark.parametrize(
    ("group_id", "java_hash_code"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("my-group", -1906497762),
        ("consumer-group-1", 147483020),
        ("Grupo-\u00e9", 1963471973),
        ("\U0001f600", 1772899),  # one code point, two UTF-16 units
    ],
)
def test_partition_for_matches_java_hash_code(group_id: str, java_hash_code: int) -> None:
    assert partition_for(group_id, 50) == abs(java_hash_code) % 50
    assert partition_for(group_id, 1) == 0


def test_partition_for_integer_min_value_hash_maps_to_zero() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; Kafka's Utils.abs makes it 0.
    assert partition_for("polygenelubricants", 7) == 0


def test_offset_key_bytes_are_kafkas_version_1() -> None:
    raw = offset_key("g", TopicPartition("t", 3))
    assert raw == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(raw) == OffsetKey("g", "t", 3)


def test_group_key_bytes_are_kafkas_version_2() -> None:
    raw = group_key("grp")
    assert raw == b"\x00\x02\x00\x03grp"
    assert decode_key(raw) == GroupKey("grp")


def test_offset_value_v3_layout_and_round_trip() -> None:
    value = CommittedOffset(offset=42, leader_epoch=5, metadata="m", commit_timestamp_ms=1000)
    raw = offset_value(value)
    assert raw == struct.pack(">hqih1sq", 3, 42, 5, 1, b"m", 1000)
    assert decode_offset_value(raw) == value


def test_offset_value_with_retention_uses_v1_with_expire_timestamp() -> None:
    value = CommittedOffset(42, -1, "", 1000, expire_timestamp_ms=5000)
    raw = offset_value(value)
    assert raw[:2] == b"\x00\x01"
    assert decode_offset_value(raw) == value


def test_older_offset_values_decode() -> None:
    v0 = struct.pack(">hqh2sq", 0, 7, 2, b"md", 99)
    assert decode_offset_value(v0) == CommittedOffset(7, -1, "md", 99)


def test_group_value_v3_round_trip_with_static_and_dynamic_members() -> None:
    value = GroupRecord(
        protocol_type="consumer",
        generation_id=4,
        protocol_name="range",
        leader_id="a-1",
        current_state_timestamp_ms=123,
        members=(
            MemberRecord("a-1", None, "a", "/127.0.0.1", 300, 100, b"sub", b"asg"),
            MemberRecord("i-2", "i", "b", "/127.0.0.1", 300, 100, b"", b""),
        ),
    )
    raw = group_value(value)
    assert raw[:2] == b"\x00\x03"
    assert decode_group_value(raw) == value


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupRecord("consumer", 2, None, None, 5, ())
    raw = group_value(value)
    assert raw == struct.pack(">hh8sihhqi", 3, 8, b"consumer", 2, -1, -1, 5, 0)
    assert decode_group_value(raw) == value


@pytest.mark.parametrize(
    "raw",
    [b"\x00\x09\x00\x01g", b"\x00\x01\x00\x05g", b"\x00\x02\x00\x01gX"],
    ids=["unknown-version", "truncated", "trailing-bytes"],
)
def test_malformed_keys_raise_schema_error(raw: bytes) -> None:
    with pytest.raises(SchemaError):
        decode_key(raw)


def test_offset_value_v4_flexible_decodes_and_skips_tagged_fields() -> None:
    # compact string "md" (length + 1), then a tagged-field section holding one 2-byte field
    raw = struct.pack(">hqi", 4, 7, 3) + b"\x03md" + struct.pack(">q", 99) + b"\x01\x05\x02xy"
    assert decode_offset_value(raw) == CommittedOffset(7, 3, "md", 99)


def test_group_value_v4_flexible_decodes() -> None:
    member = (
        b"\x04a-1"  # member id
        + b"\x00"  # null group instance id
        + b"\x02a"  # client id
        + b"\x0b/127.0.0.1"  # client host
        + struct.pack(">ii", 300, 100)
        + b"\x04sub"
        + b"\x04asg"
        + b"\x00"  # no tagged fields
    )
    raw = (
        struct.pack(">h", 4)
        + b"\x09consumer"
        + struct.pack(">i", 4)
        + b"\x06range"
        + b"\x04a-1"
        + struct.pack(">q", 123)
        + b"\x02"  # one member
        + member
        + b"\x00"
    )
    assert decode_group_value(raw) == GroupRecord(
        "consumer",
        4,
        "range",
        "a-1",
        123,
        (MemberRecord("a-1", None, "a", "/127.0.0.1", 300, 100, b"sub", b"asg"),),
    )


def test_every_record_the_coordinator_writes_has_a_key() -> None:
    # the log cleaner refuses keyless records on a compacted topic; keys are never empty
    assert offset_key("", TopicPartition("", 0))
    assert group_key("")
