"""Shared builders for the manager tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator

from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

TIP = TopicIdPartition(uuid.UUID(int=7), "orders", 0)


def seg(
    start: int,
    end: int,
    epochs: dict[int, int] | None = None,
    *,
    size: int = 1024,
    max_ts: int = 0,
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=max_ts,
        broker_id=0,
        event_timestamp_ms=0,
        segment_size_in_bytes=size,
        custom_metadata=None,
        state=state,
        segment_leader_epochs=epochs or {0: start},
    )


def by_epoch(
    segments: Iterable[RemoteLogSegmentMetadata],
) -> tuple[list[RemoteLogSegmentMetadata], Callable[[int], Iterator[RemoteLogSegmentMetadata]]]:
    listed = [s for s in segments if s.state is not RemoteLogSegmentState.DELETE_SEGMENT_FINISHED]

    def for_epoch(epoch: int) -> Iterator[RemoteLogSegmentMetadata]:
        return iter(
            sorted(
                (s for s in listed if epoch in s.segment_leader_epochs),
                key=lambda s: s.start_offset,
            )
        )

    return listed, for_epoch
