"""An event in the deletion of a whole partition from the remote tier."""

from __future__ import annotations

from dataclasses import dataclass

from tierlog.tiered.api.remote_partition_delete_state import RemotePartitionDeleteState
from tierlog.tiered.api.topic_id_partition import TopicIdPartition


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    """Recorded so a partition delete interrupted by a crash can be resumed from its state."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int

    def __post_init__(self) -> None:
        if not isinstance(self.state, RemotePartitionDeleteState):
            raise TypeError(f"state must be a RemotePartitionDeleteState, got {self.state!r}")
