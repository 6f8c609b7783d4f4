"""Remote retention planning (spec §1.5) as a pure function.

The expiration task separates *deciding* from *doing*: this module walks the remote segments
within the leader-epoch lineage and returns what to delete and where the log start offset
must move; the task then publishes the new log start offset **before** deleting anything,
so a crash between the two never exposes offsets whose bytes are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
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
    """Segments whose epochs all predate the earliest local epoch, or that lie outside the
    leader-epoch lineage (both left behind by an unclean election)."""
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
    """What one expiration run deletes: the retention walk over the lineage epochs
    (``_RetentionWalk``, against the limits ``_bytes_over_retention`` and ``_time_cutoff``),
    then the segments that no epoch of the log refers to any more
    (``_unreferenced_segments``). The counts cover every listed segment."""
    listed = list(all_segments)
    plan = ExpirationPlan(
        metadata_count=len(listed),
        remote_size_bytes=sum(s.segment_size_in_bytes for s in listed),
    )
    if not listed or not leader_epochs:
        return plan
    lineage = build_filtered_leader_epoch_map(dict(leader_epochs))
    walk = _RetentionWalk(
        lineage=lineage,
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
        bytes_over=_bytes_over_retention(
            retention_bytes,
            only_local_size_bytes,
            lambda: _remote_size_in_lineage(lineage, segments_for_epoch, log_end_offset),
        ),
        cleanup_until=_time_cutoff(retention_ms, now_ms),
        being_copied=being_copied,
    )
    walk.run(segments_for_epoch)
    plan.to_delete = walk.to_delete
    plan.new_log_start_offset = walk.new_start
    plan.unreferenced = _unreferenced_segments(
        listed, leader_epochs[0][0], segments_for_epoch, walk.queued, being_copied
    )
    plan.unreferenced += _diverged_segments(
        listed, lineage, log_end_offset, walk.queued, being_copied
    )
    return plan


def _remote_size_in_lineage(
    lineage: Mapping[int, int],
    segments_for_epoch: Callable[[int], Iterable[RemoteLogSegmentMetadata]],
    log_end_offset: int,
) -> int:
    """Bytes of the COPY_FINISHED segments within the lineage, each counted once."""
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
    return remote_size


def _bytes_over_retention(
    retention_bytes: int, only_local_size_bytes: int, remote_size: Callable[[], int]
) -> int | None:
    """How many bytes the size rule must delete; None when it deletes nothing. The remote
    size is listed only when ``retention.bytes`` is set."""
    if retention_bytes <= -1:
        return None
    total = only_local_size_bytes + remote_size()
    return total - retention_bytes if total > retention_bytes else None


def _time_cutoff(retention_ms: int, now_ms: int) -> int | None:
    """Segments whose newest record is at or before this time breach ``retention.ms``."""
    if retention_ms > -1 and now_ms - retention_ms >= 0:
        return now_ms - retention_ms
    return None


@dataclass
class _RetentionWalk:
    """Kafka's walk over the remote segments of each lineage epoch, oldest first.

    A segment is deleted when it lies wholly below the log start (all its epochs at or
    before the first), or, within the lineage, when it breaches the time or the size
    rule; the size rule deletes a segment only while the bytes over the limit still
    cover it whole. The walk stops at the first segment within the lineage that stays,
    and at a segment this broker is copying. A DELETE_STARTED segment is retried.
    """

    lineage: Mapping[int, int]
    log_start_offset: int
    log_end_offset: int
    bytes_over: int | None
    cleanup_until: int | None
    being_copied: Set[RemoteLogSegmentId]
    to_delete: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    queued: set[RemoteLogSegmentId] = field(default_factory=set)
    new_start: int | None = None

    def run(self, segments_for_epoch: Callable[[int], Iterable[RemoteLogSegmentMetadata]]) -> None:
        first_epoch = next(iter(self.lineage))
        for epoch in self.lineage:
            for s in segments_for_epoch(epoch):
                if not self._visit(s, first_epoch):
                    return

    def _visit(self, s: RemoteLogSegmentMetadata, first_epoch: int) -> bool:
        """Queue ``s`` if it goes; False ends the walk."""
        sid = s.remote_log_segment_id
        if sid in self.being_copied:
            return False
        if s.state is _DELETE_FINISHED or sid in self.queued:
            return True
        if s.state is _DELETE_STARTED:
            self._queue(s)
            return True
        below_log_start = (
            all(e <= first_epoch for e in s.segment_leader_epochs)
            and s.end_offset < self.log_start_offset
        )
        if below_log_start:
            self._queue(s)
            return True
        if not is_remote_segment_within_leader_epochs(
            s.segment_leader_epochs, s.end_offset, self.log_end_offset, self.lineage
        ):
            return True
        if not self._breaches_retention(s):
            return False
        self.new_start = max(self.new_start or 0, s.end_offset + 1)
        self._queue(s)
        return True

    def _breaches_retention(self, s: RemoteLogSegmentMetadata) -> bool:
        if self.cleanup_until is not None and s.max_timestamp_ms <= self.cleanup_until:
            return True
        over = self.bytes_over
        if over is not None and over > 0 and over - s.segment_size_in_bytes >= 0:
            self.bytes_over = over - s.segment_size_in_bytes
            return True
        return False

    def _queue(self, s: RemoteLogSegmentMetadata) -> None:
        self.queued.add(s.remote_log_segment_id)
        self.to_delete.append(s)


def _unreferenced_segments(
    listed: Sequence[RemoteLogSegmentMetadata],
    earliest_epoch: int,
    segments_for_epoch: Callable[[int], Iterable[RemoteLogSegmentMetadata]],
    queued: set[RemoteLogSegmentId],
    being_copied: Set[RemoteLogSegmentId],
) -> list[RemoteLogSegmentMetadata]:
    """Segments whose epochs all predate the earliest epoch of the log (an unclean
    election left them behind); ``queued`` gains each one."""
    out: list[RemoteLogSegmentMetadata] = []
    older = sorted({e for s in listed for e in s.segment_leader_epochs if e < earliest_epoch})
    for epoch in older:
        for s in segments_for_epoch(epoch):
            sid = s.remote_log_segment_id
            if sid in queued or sid in being_copied or s.state is _DELETE_FINISHED:
                continue
            if all(e < earliest_epoch for e in s.segment_leader_epochs):
                queued.add(sid)
                out.append(s)
    return out


def _diverged_segments(
    listed: Sequence[RemoteLogSegmentMetadata],
    lineage: Mapping[int, int],
    log_end_offset: int,
    queued: set[RemoteLogSegmentId],
    being_copied: Set[RemoteLogSegmentId],
) -> list[RemoteLogSegmentMetadata]:
    """Finished segments outside the leader-epoch lineage (spec §1.6): an epoch this log
    never had, an epoch boundary elsewhere, or offsets past its end. Uploaded by a leader
    whose history an unclean election cut off, no consumer of this lineage reads them, so
    they are deleted (without moving the log start); ``queued`` gains each one.

    A clean leader never sees such a segment: uploads stop at the old leader's last stable
    offset, which every in-sync replica holds with the same epochs."""
    out: list[RemoteLogSegmentMetadata] = []
    for s in sorted(listed, key=lambda m: m.start_offset):
        sid = s.remote_log_segment_id
        if s.state is not _FINISHED or sid in queued or sid in being_copied:
            continue
        if not is_remote_segment_within_leader_epochs(
            s.segment_leader_epochs, s.end_offset, log_end_offset, lineage
        ):
            queued.add(sid)
            out.append(s)
    return out
