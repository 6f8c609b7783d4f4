"""Builders shared by the metadata tests (kept tiny so each test states its own numbers)."""

from __future__ import annotations

import uuid

from tierlog.tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)

TIP = TopicIdPartition(uuid.UUID("6b0f4a0e-2b7e-4a51-9c1e-0f3d5a7c9e11"), "orders", 0)


def segment(
    start: int,
    end: int,
    epochs: dict[int, int] | None = None,
    *,
    tip: TopicIdPartition = TIP,
    size: int = 1000,
    txn_idx_empty: bool = True,
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=start * 10,
        broker_id=0,
        event_timestamp_ms=1,
        segment_size_in_bytes=size,
        custom_metadata=None,
        state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        segment_leader_epochs={0: start} if epochs is None else epochs,
        txn_idx_empty=txn_idx_empty,
    )


def update(
    m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState, *, custom: bytes | None = None
) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(
        m.remote_log_segment_id,
        event_timestamp_ms=2,
        custom_metadata=None if custom is None else CustomMetadata(custom),
        state=state,
        broker_id=1,
    )
