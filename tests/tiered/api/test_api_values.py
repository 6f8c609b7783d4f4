"""Invariants and update semantics of the API value types."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from tierlog.tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)

TIP = TopicIdPartition(uuid.UUID(int=7), "orders", 3)


def seg(
    start: int = 0, end: int = 100, epochs: dict[int, int] | None = None
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=1_000,
        broker_id=1,
        event_timestamp_ms=2_000,
        segment_size_in_bytes=4096,
        custom_metadata=None,
        state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        segment_leader_epochs={0: start} if epochs is None else epochs,
    )


def test_negative_start_offset_is_rejected() -> None:
    with pytest.raises(ValueError, match="start_offset"):
        seg(start=-1, end=10, epochs={0: 0})


def test_end_before_start_is_rejected() -> None:
    with pytest.raises(ValueError, match="end_offset"):
        seg(start=10, end=9)


def test_empty_leader_epochs_are_rejected() -> None:
    with pytest.raises(ValueError, match="segment_leader_epochs"):
        seg(epochs={})


def test_single_offset_segment_is_allowed() -> None:
    assert seg(start=5, end=5).end_offset == 5


def test_leader_epochs_are_sorted_and_read_only() -> None:
    m = seg(epochs={3: 50, 0: 0, 1: 20})
    assert list(m.segment_leader_epochs.items()) == [(0, 0), (1, 20), (3, 50)]
    with pytest.raises(TypeError):
        m.segment_leader_epochs[4] = 60  # type: ignore[index]


def test_metadata_is_immutable_and_hashable() -> None:
    m = seg()
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.start_offset = 3  # type: ignore[misc]
    assert m in {m}


def test_create_with_updates_takes_state_broker_time_and_custom_metadata() -> None:
    m = seg(start=10, end=100, epochs={0: 10, 1: 40})
    update = RemoteLogSegmentMetadataUpdate(
        m.remote_log_segment_id,
        event_timestamp_ms=9_999,
        custom_metadata=CustomMetadata(b"key=abc"),
        state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        broker_id=7,
    )
    u = m.create_with_updates(update)
    assert u is not m
    assert (u.state, u.broker_id, u.event_timestamp_ms, u.custom_metadata) == (
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        7,
        9_999,
        CustomMetadata(b"key=abc"),
    )
    assert (u.start_offset, u.end_offset, u.max_timestamp_ms, u.segment_size_in_bytes) == (
        10,
        100,
        1_000,
        4096,
    )
    assert dict(u.segment_leader_epochs) == {0: 10, 1: 40}
    assert m.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED


def test_create_with_updates_for_another_segment_is_rejected() -> None:
    m = seg()
    other = RemoteLogSegmentMetadataUpdate(
        RemoteLogSegmentId.generate_new(TIP),
        1,
        None,
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        1,
    )
    with pytest.raises(ValueError, match="update is for segment"):
        m.create_with_updates(other)


def test_generate_new_gives_distinct_ids_for_same_partition() -> None:
    a, b = RemoteLogSegmentId.generate_new(TIP), RemoteLogSegmentId.generate_new(TIP)
    assert a != b
    assert a.topic_id_partition == b.topic_id_partition == TIP


def test_topic_id_partition_property() -> None:
    assert seg().topic_id_partition == TIP
