"""What a follower rebuilding its state from the remote tier reads (KIP-405,
spec/kafka-tiered-storage.md §7.2 step 3 and 6): the COPY_SEGMENT_FINISHED segment holding
``(epoch, offset)`` in this broker's RLMM, its leader-epoch checkpoint and its producer
snapshot through the RSM. Never any record data: the tiered history stays remote.
"""

from __future__ import annotations

from dataclasses import dataclass

from tierlog.log import PartitionLog
from tierlog.tiered.api import (
    IndexType,
    RemoteLogMetadataManager,
    RemoteStorageManager,
    TopicIdPartition,
)

__all__ = ["SegmentAuxState", "parse_epoch_checkpoint", "read_segment_aux_state"]


class NoRemoteSegment(LookupError):
    """No finished remote segment holds the offset (yet)."""


@dataclass(frozen=True)
class SegmentAuxState:
    next_offset: int
    epochs: list[tuple[int, int]]
    producer_snapshot: bytes


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """Kafka's leader-epoch checkpoint text ("0\\n<count>\\n<epoch> <offset>\\n...")."""
    lines = [ln.strip() for ln in data.decode().splitlines() if ln.strip()]
    if len(lines) < 2 or lines[0] != "0":
        raise ValueError(f"not a leader-epoch checkpoint: {data[:64]!r}")
    count = int(lines[1])
    entries = []
    for line in lines[2 : 2 + count]:
        epoch, offset = line.split()
        entries.append((int(epoch), int(offset)))
    if len(entries) != count:
        raise ValueError(f"leader-epoch checkpoint says {count} entries, has {len(entries)}")
    return entries


def read_segment_aux_state(
    rlmm: RemoteLogMetadataManager,
    rsm: RemoteStorageManager,
    lg: PartitionLog,
    epoch: int,
    offset: int,
) -> SegmentAuxState:
    """Blocking (RSM reads). Raises ``NoRemoteSegment`` when the local metadata has no
    finished segment for ``(epoch, offset)``, and the plugins' exceptions otherwise."""
    if lg.topic_id is None:
        raise NoRemoteSegment(f"{lg.tp} has no topic id")
    tip = TopicIdPartition(lg.topic_id, lg.tp.topic, lg.tp.partition)
    md = rlmm.remote_log_segment_metadata(tip, epoch, offset)
    if md is None:
        raise NoRemoteSegment(f"no remote segment of {tip} holds offset {offset} (epoch {epoch})")
    with rsm.fetch_index(md, IndexType.LEADER_EPOCH) as f:
        epochs = parse_epoch_checkpoint(f.read())
    with rsm.fetch_index(md, IndexType.PRODUCER_SNAPSHOT) as f:
        snapshot = f.read()
    return SegmentAuxState(md.end_offset + 1, epochs, snapshot)
