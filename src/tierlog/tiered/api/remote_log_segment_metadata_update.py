"""A state change of one remote segment, as published to the metadata manager."""

from __future__ import annotations

from dataclasses import dataclass

from tierlog.tiered.api.custom_metadata import CustomMetadata
from tierlog.tiered.api.remote_log_segment_id import RemoteLogSegmentId
from tierlog.tiered.api.remote_log_segment_state import RemoteLogSegmentState
from tierlog.tiered.api.topic_id_partition import TopicIdPartition


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    """Carries only what may change after a segment was announced.

    Offsets, epochs and size are fixed when the copy starts; an update can only move the
    state forward and record who did it, when, and what the plugin returned.
    """

    remote_log_segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: CustomMetadata | None
    state: RemoteLogSegmentState
    broker_id: int

    def __post_init__(self) -> None:
        if not isinstance(self.state, RemoteLogSegmentState):
            raise TypeError(f"state must be a RemoteLogSegmentState, got {self.state!r}")

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition
