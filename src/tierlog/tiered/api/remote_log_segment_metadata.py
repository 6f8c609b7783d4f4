"""Everything the broker knows about one remote segment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from tierlog.tiered.api.custom_metadata import CustomMetadata
from tierlog.tiered.api.remote_log_segment_id import RemoteLogSegmentId
from tierlog.tiered.api.remote_log_segment_metadata_update import (
    RemoteLogSegmentMetadataUpdate,
)
from tierlog.tiered.api.remote_log_segment_state import RemoteLogSegmentState
from tierlog.tiered.api.topic_id_partition import TopicIdPartition


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """Immutable; a state change produces a new object via ``create_with_updates``.

    ``start_offset`` and ``end_offset`` are inclusive. ``segment_leader_epochs`` maps each
    leader epoch present in the segment to the first offset of that epoch inside it, sorted by
    epoch; it is never empty (a single-epoch segment maps that epoch to ``start_offset``),
    because lookups by (epoch, offset) and lineage checks depend on it.
    ``txn_idx_empty`` lets readers skip fetching a transaction index that does not exist.
    """

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    custom_metadata: CustomMetadata | None
    state: RemoteLogSegmentState
    segment_leader_epochs: Mapping[int, int]
    txn_idx_empty: bool = False

    def __post_init__(self) -> None:
        if self.start_offset < 0:
            raise ValueError(f"start_offset must be >= 0, got {self.start_offset}")
        if self.end_offset < self.start_offset:
            raise ValueError(
                f"end_offset {self.end_offset} must be >= start_offset {self.start_offset}"
            )
        if not self.segment_leader_epochs:
            raise ValueError("segment_leader_epochs must not be empty")
        if not isinstance(self.state, RemoteLogSegmentState):
            raise TypeError(f"state must be a RemoteLogSegmentState, got {self.state!r}")
        frozen = MappingProxyType(dict(sorted(self.segment_leader_epochs.items())))
        object.__setattr__(self, "segment_leader_epochs", frozen)

    def __hash__(self) -> int:
        return hash((self.remote_log_segment_id, self.state, self.event_timestamp_ms))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition

    def create_with_updates(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> RemoteLogSegmentMetadata:
        """Apply an update: state, broker, event time and custom metadata come from it;
        offsets, epochs, size and timestamps stay. The transition itself is not checked here
        (that is the metadata cache's job)."""
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise ValueError(
                f"update is for segment {update.remote_log_segment_id}, "
                f"not {self.remote_log_segment_id}"
            )
        return RemoteLogSegmentMetadata(
            remote_log_segment_id=self.remote_log_segment_id,
            start_offset=self.start_offset,
            end_offset=self.end_offset,
            max_timestamp_ms=self.max_timestamp_ms,
            broker_id=update.broker_id,
            event_timestamp_ms=update.event_timestamp_ms,
            segment_size_in_bytes=self.segment_size_in_bytes,
            custom_metadata=update.custom_metadata,
            state=update.state,
            segment_leader_epochs=self.segment_leader_epochs,
            txn_idx_empty=self.txn_idx_empty,
        )
