"""The complete metadata state of one user partition, as captured for snapshots."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tierlog.tiered.api import (
    RemoteLogSegmentMetadata,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
)


@dataclass(frozen=True, slots=True)
class EpochSnapshot:
    """One leader epoch's read mapping; kept verbatim because which segments are referenced
    and the epoch's highest offset depend on the order events arrived in."""

    epoch: int
    highest_log_offset: int | None
    referenced: tuple[tuple[int, uuid.UUID], ...]  # (epoch start offset in segment, segment id)
    unreferenced: tuple[uuid.UUID, ...]


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """State of a user partition after applying every metadata record below
    ``covered_offset`` (the next offset of its metadata partition to replay)."""

    topic_id_partition: TopicIdPartition
    covered_offset: int
    delete_metadata: RemotePartitionDeleteMetadata | None
    segments: tuple[RemoteLogSegmentMetadata, ...]
    epochs: tuple[EpochSnapshot, ...]
