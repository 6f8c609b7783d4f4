"""Remote retention planning (spec §1.5) as a pure function.

The expiration task separates *deciding* from *doing*: this module walks the remote segments
within the leader-epoch lineage and returns what to delete and where the log start offset
must move; the task then publishes the new log start offset **before** deleting anything,
so a crash between the two never exposes offsets whose bytes are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass, field

from tierlog.tiered.api import RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentState
from tierlog.tiered.manager.lineage import (
    EpochEntry,
    build_filtered_leader_epoch_map,
    is_remote_segment_within_leader_epochs,
)

__all__ = ["ExpirationPlan", "plan_expiration"]

_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
_DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


@dataclass
class ExpirationPlan:
    to_delete: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    """Breached segments and dangling DELETE_STARTED retries, oldest first."""
    new_log_start_offset: int | None = None
    """``max(end + 1)`` over segments deleted for time or size; None leaves it unchanged."""
    unreferenced: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    """Segments whose epochs all predate the earliest local epoch (unclean election)."""
    metadata_count: int = 0
    remote_size_bytes: int = 0

    @property
    def all_deletions(self) -> list[RemoteLogSegmentMetadata]:
        return self.to_delete + self.unreferenced


def plan_expiration(
    *,
    all_segments: Iterable[RemoteLogSegmentMetadata],
    segments_for_epoch: Callable[[int], Iterable[RemoteLogSegmentMetadata]],
    leader_epochs: Sequence[EpochEntry],
    log_start_offset: int,
    log_end_offset: int,
    only_local_size_bytes: int,
    retention_ms: int,
    retention_bytes: int,
    now_ms: int,
    being_copied: Set[RemoteLogSegmentId] = frozenset(),
) -> ExpirationPlan:
    plan = ExpirationPlan()
    listed = list(all_segments)
    plan.metadata_count = len(listed)
    plan.remote_size_bytes = sum(s.segment_size_in_bytes for s in listed)
    if not listed or not leader_epochs:
        return plan
    lineage = build_filtered_leader_epoch_map(dict(leader_epochs))

    remaining: int | None = None
    if retention_bytes > -1:
        seen: set[RemoteLogSegmentId] = set()
        remote_size = 0
        for epoch in lineage:
            for s in segments_for_epoch(epoch):
                if s.state is not _FINISHED or s.remote_log_segment_id in seen:
                    continue
                if is_remote_segment_within_leader_epochs(
                    s.segment_leader_epochs, s.end_offset, log_end_offset, lineage
                ):
                    seen.add(s.remote_log_segment_id)
                    remote_size += s.segment_size_in_bytes
        total = only_local_size_bytes + remote_size
        if total > retention_bytes:
            remaining = total - retention_bytes
    cleanup_until: int | None = None
    if retention_ms > -1 and now_ms - retention_ms >= 0:
        cleanup_until = now_ms - retention_ms

    first_epoch = next(iter(lineage))
    queued: set[RemoteLogSegmentId] = set()
    new_start: int | None = None

    def queue(s: RemoteLogSegmentMetadata) -> None:
        queued.add(s.remote_log_segment_id)
        plan.to_delete.append(s)

    walking = True
    for epoch in lineage:
        if not walking:
            break
        for s in segments_for_epoch(epoch):
            sid = s.remote_log_segment_id
            if sid in being_copied:
                walking = False
                break
            if s.state is _DELETE_FINISHED or sid in queued:
                continue
            if s.state is _DELETE_STARTED:
                queue(s)
                continue
            should_delete = (
                all(e <= first_epoch for e in s.segment_leader_epochs)
                and s.end_offset < log_start_offset
            )
            valid = False
            if not should_delete:
                valid = is_remote_segment_within_leader_epochs(
                    s.segment_leader_epochs, s.end_offset, log_end_offset, lineage
                )
                if valid:
                    if cleanup_until is not None and s.max_timestamp_ms <= cleanup_until:
                        should_delete = True
                    elif (
                        remaining is not None
                        and remaining > 0
                        and remaining - s.segment_size_in_bytes >= 0
                    ):
                        remaining -= s.segment_size_in_bytes
                        should_delete = True
                    if should_delete:
                        new_start = max(new_start or 0, s.end_offset + 1)
            if should_delete:
                queue(s)
            if not (should_delete or not valid):
                walking = False
                break
    plan.new_log_start_offset = new_start

    earliest = leader_epochs[0][0]
    remote_epochs = sorted({e for s in listed for e in s.segment_leader_epochs if e < earliest})
    for epoch in remote_epochs:
        for s in segments_for_epoch(epoch):
            sid = s.remote_log_segment_id
            if sid in queued or sid in being_copied or s.state is _DELETE_FINISHED:
                continue
            if all(e < earliest for e in s.segment_leader_epochs):
                queued.add(sid)
                plan.unreferenced.append(s)
    return plan
