"""Round trips of every record kind (hypothesis) and clear errors for what cannot be read."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from tierlog.tiered.metadata.partition_snapshot import EpochSnapshot, PartitionSnapshot
from tierlog.tiered.metadata.serde import MetadataSerdeError, deserialize, serialize

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
OFFSET = st.integers(0, 2**62)
UUIDS = st.uuids()

tips = st.builds(
    TopicIdPartition,
    topic_id=UUIDS,
    topic=st.text(min_size=1, max_size=40),
    partition=st.integers(0, 2**31 - 1),
)
customs = st.none() | st.builds(CustomMetadata, st.binary(max_size=300))


@st.composite
def segments(draw: st.DrawFn, tip: TopicIdPartition | None = None) -> RemoteLogSegmentMetadata:
    start = draw(OFFSET)
    end = start + draw(st.integers(0, 2**40))
    epochs = draw(st.dictionaries(st.integers(0, 2**31 - 1), OFFSET, min_size=1, max_size=5))
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId(tip or draw(tips), draw(UUIDS)),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=draw(I64),
        broker_id=draw(I32),
        event_timestamp_ms=draw(I64),
        segment_size_in_bytes=draw(I64),
        custom_metadata=draw(customs),
        state=draw(st.sampled_from(RemoteLogSegmentState)),
        segment_leader_epochs=epochs,
        txn_idx_empty=draw(st.booleans()),
    )


updates = st.builds(
    RemoteLogSegmentMetadataUpdate,
    remote_log_segment_id=st.builds(RemoteLogSegmentId, tips, UUIDS),
    event_timestamp_ms=I64,
    custom_metadata=customs,
    state=st.sampled_from(RemoteLogSegmentState),
    broker_id=I32,
)

deletes = st.builds(
    RemotePartitionDeleteMetadata,
    topic_id_partition=tips,
    state=st.sampled_from(RemotePartitionDeleteState),
    event_timestamp_ms=I64,
    broker_id=I32,
)

epoch_snapshots = st.builds(
    EpochSnapshot,
    epoch=I32,
    highest_log_offset=st.none() | OFFSET,
    referenced=st.lists(st.tuples(OFFSET, UUIDS), max_size=4).map(tuple),
    unreferenced=st.lists(UUIDS, max_size=4).map(tuple),
)


@st.composite
def snapshots(draw: st.DrawFn) -> PartitionSnapshot:
    tip = draw(tips)
    delete = draw(
        st.none()
        | st.builds(
            RemotePartitionDeleteMetadata,
            topic_id_partition=st.just(tip),
            state=st.sampled_from(RemotePartitionDeleteState),
            event_timestamp_ms=I64,
            broker_id=I32,
        )
    )
    return PartitionSnapshot(
        topic_id_partition=tip,
        covered_offset=draw(OFFSET),
        delete_metadata=delete,
        segments=tuple(draw(st.lists(segments(tip), max_size=4))),
        epochs=tuple(draw(st.lists(epoch_snapshots, max_size=4))),
    )


def assert_same_segment(a: object, b: object) -> None:
    assert a == b
    assert isinstance(a, RemoteLogSegmentMetadata) and isinstance(b, RemoteLogSegmentMetadata)
    assert list(a.segment_leader_epochs.items()) == list(b.segment_leader_epochs.items())


@given(segments())
def test_segment_metadata_round_trips(m: RemoteLogSegmentMetadata) -> None:
    assert_same_segment(deserialize(serialize(m)), m)


@given(updates)
def test_segment_update_round_trips(u: RemoteLogSegmentMetadataUpdate) -> None:
    assert deserialize(serialize(u)) == u


@given(deletes)
def test_partition_delete_round_trips(d: RemotePartitionDeleteMetadata) -> None:
    assert deserialize(serialize(d)) == d


@given(snapshots())
def test_snapshot_round_trips(s: PartitionSnapshot) -> None:
    assert deserialize(serialize(s)) == s


def sample_update() -> RemoteLogSegmentMetadataUpdate:
    tip = TopicIdPartition(uuid.UUID(int=1), "t", 0)
    return RemoteLogSegmentMetadataUpdate(
        RemoteLogSegmentId(tip, uuid.UUID(int=2)),
        5,
        None,
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        1,
    )


def test_unknown_version_names_the_record_and_version() -> None:
    data = bytearray(serialize(sample_update()))
    data[1] = 7
    with pytest.raises(MetadataSerdeError, match=r"unsupported version 7 of .*Update"):
        deserialize(bytes(data))


def test_unknown_kind_is_a_clear_error() -> None:
    data = bytearray(serialize(sample_update()))
    data[0] = 42
    with pytest.raises(MetadataSerdeError, match="unknown __remote_log_metadata record kind 42"):
        deserialize(bytes(data))


def test_truncated_record_is_reported_as_corrupt() -> None:
    data = serialize(sample_update())
    with pytest.raises(MetadataSerdeError, match="corrupt"):
        deserialize(data[:-3])


def test_trailing_bytes_are_reported() -> None:
    with pytest.raises(MetadataSerdeError, match="trailing"):
        deserialize(serialize(sample_update()) + b"\x00")


def test_unknown_state_id_is_reported_as_corrupt() -> None:
    data = bytearray(serialize(sample_update()))
    data[-5] = 9  # state byte precedes the 4-byte custom-metadata length
    with pytest.raises(MetadataSerdeError, match="unknown remote log segment state id 9"):
        deserialize(bytes(data))


def test_wire_layout_starts_with_kafka_api_key_and_version() -> None:
    assert serialize(sample_update())[:2] == b"\x01\x00"
