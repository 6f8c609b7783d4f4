"""``__transaction_state`` records and transaction markers, byte for byte as Kafka writes them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.protocol.records import iter_records, read_header
from tierlog.server.group.schema import partition_for
from tierlog.server.txn.schema import (
    ControlRecordType,
    EndTxnMarker,
    TxnLogValue,
    TxnSchemaError,
    build_marker_batch,
    control_record_type,
    coordinator_partition,
    decode_key,
    decode_marker,
    decode_value,
    encode_key,
    encode_marker_key,
    encode_marker_value,
    encode_value,
)

VALUE = TxnLogValue(
    producer_id=4096,
    producer_epoch=2,
    timeout_ms=60_000,
    state=1,
    partitions=(("ab", (0, 3)),),
    last_update_ms=5,
    start_ms=4,
)

V0_BYTES = bytes.fromhex(
    "0000"  # version
    "0000000000001000"  # producer id
    "0002"  # epoch
    "0000ea60"  # timeout
    "01"  # Ongoing
    "00000001"
    "0002"
    "6162"
    "00000002"
    "00000000"
    "00000003"  # [ab: 0, 3]
    "0000000000000005"  # last update
    "0000000000000004"  # start
)

V1_BYTES = bytes.fromhex(
    "0001"
    "0000000000001000"
    "0002"
    "0000ea60"
    "01"
    "02"
    "03"
    "6162"
    "03"
    "00000000"
    "00000003"
    "00"  # compact array, struct tags
    "0000000000000005"
    "0000000000000004"
    "00"  # no tagged fields: every tagged field at its default
)


def test_key_bytes() -> None:
    assert encode_key("t") == bytes.fromhex("0000000174")
    assert decode_key(bytes.fromhex("0000000174")) == "t"


def test_unknown_key_version_is_skipped() -> None:
    assert decode_key(bytes.fromhex("0001000174")) is None


def test_value_v0_bytes() -> None:
    assert encode_value(VALUE, version=0) == V0_BYTES
    assert decode_value(V0_BYTES) == VALUE


def test_value_v1_bytes() -> None:
    assert encode_value(VALUE, version=1) == V1_BYTES
    assert decode_value(V1_BYTES) == VALUE


def test_value_v1_tagged_fields() -> None:
    value = TxnLogValue(
        producer_id=1,
        producer_epoch=0,
        timeout_ms=1,
        state=0,
        partitions=(),
        last_update_ms=0,
        start_ms=-1,
        prev_producer_id=7,
        client_transaction_version=2,
    )
    data = encode_value(value)
    assert data is not None
    assert data[2 + 8 + 2 + 4 + 1] == 0  # Empty: null compact array
    tail = bytes.fromhex("020008000000000000000702020002")
    assert data.endswith(tail)
    assert decode_value(data) == value


def test_empty_partitions_are_null() -> None:
    value = TxnLogValue(1, 0, 1, 0, (), 0, -1)
    data = encode_value(value, version=0)
    assert data is not None
    assert data[17:21] == bytes.fromhex("ffffffff")
    assert decode_value(data) == value


def test_tombstone() -> None:
    assert encode_value(None) is None
    assert decode_value(None) is None


@pytest.mark.parametrize("data", [b"\x00\x02" + V0_BYTES[2:], V0_BYTES[:-1], V0_BYTES + b"\x00"])
def test_bad_values_are_refused(data: bytes) -> None:
    with pytest.raises(TxnSchemaError):
        decode_value(data)


_ids = st.integers(-(2**63), 2**63 - 1)
_values = st.builds(
    TxnLogValue,
    producer_id=_ids,
    producer_epoch=st.integers(-1, 32767),
    timeout_ms=st.integers(-(2**31), 2**31 - 1),
    state=st.integers(0, 7),
    partitions=st.lists(
        st.tuples(st.text(max_size=20), st.lists(st.integers(0, 2**31 - 1)).map(tuple)),
        max_size=4,
    ).map(tuple),
    last_update_ms=_ids,
    start_ms=_ids,
    prev_producer_id=_ids,
    next_producer_id=_ids,
    client_transaction_version=st.integers(0, 2),
)


@given(_values)
def test_value_v1_round_trip(value: TxnLogValue) -> None:
    assert decode_value(encode_value(value, version=1)) == value


@given(_values)
def test_value_v0_round_trip_drops_tagged_fields(value: TxnLogValue) -> None:
    decoded = decode_value(encode_value(value, version=0))
    assert decoded is not None
    assert decoded.producer_id == value.producer_id
    assert decoded.partitions == value.partitions
    assert (decoded.prev_producer_id, decoded.next_producer_id) == (-1, -1)
    assert decoded.client_transaction_version == 0


@given(st.text(max_size=40))
def test_key_round_trip(tid: str) -> None:
    assert decode_key(encode_key(tid)) == tid


def test_coordinator_partition_is_kafka_placement() -> None:
    assert coordinator_partition("my-txn") == partition_for("my-txn", 50)
    # Java: "hello".hashCode() == 99162322.
    assert coordinator_partition("hello", 50) == 99162322 % 50
    # Java: "polygenelubricants".hashCode() == Integer.MIN_VALUE, and Utils.abs maps it to 0.
    assert coordinator_partition("polygenelubricants", 7) == 0


def test_marker_key_and_value_bytes() -> None:
    assert encode_marker_key(ControlRecordType.COMMIT) == bytes.fromhex("00000001")
    assert encode_marker_key(ControlRecordType.ABORT) == bytes.fromhex("00000000")
    assert encode_marker_value(5) == bytes.fromhex("000000000005")
    marker = decode_marker(bytes.fromhex("00000001"), bytes.fromhex("000000000005"))
    assert marker == EndTxnMarker(ControlRecordType.COMMIT, 5)
    assert marker.committed


def test_marker_higher_value_version_read_as_v0() -> None:
    marker = decode_marker(bytes.fromhex("00000000"), bytes.fromhex("00010000000900ff"))
    assert marker == EndTxnMarker(ControlRecordType.ABORT, 9)


def test_bad_markers() -> None:
    with pytest.raises(TxnSchemaError):
        decode_marker(bytes.fromhex("00000001"), bytes.fromhex("0000000005"))
    with pytest.raises(TxnSchemaError):
        decode_marker(bytes.fromhex("00000003"), bytes.fromhex("000000000005"))
    assert control_record_type(None) == -1
    assert control_record_type(b"\x00") == -1


def test_marker_batch() -> None:
    batch = build_marker_batch(
        producer_id=42,
        producer_epoch=3,
        marker=EndTxnMarker(ControlRecordType.ABORT, 7),
        base_offset=100,
        timestamp_ms=1_000,
    )
    assert len(batch) == 78
    header = read_header(batch)
    assert header.is_control and header.is_transactional
    assert batch[21:23] == bytes.fromhex("0030")  # attributes
    assert (header.base_offset, header.last_offset) == (100, 100)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
    (record,) = list(iter_records(batch))
    assert decode_marker(record.key, record.value) == EndTxnMarker(ControlRecordType.ABORT, 7)
