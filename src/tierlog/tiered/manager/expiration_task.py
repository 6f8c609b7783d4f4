"""The expiration task of one led partition (Kafka's ``RLMExpirationTask``, spec §1.5).

Each run plans with ``expiration.plan_expiration`` and then acts on the plan:

* the log start offset moves before any expired segment is deleted, so a crash between the
  two never exposes offsets whose bytes are gone;
* a segment is deleted as DELETE_SEGMENT_STARTED (durable), the RSM delete, then
  DELETE_SEGMENT_FINISHED;
* expiration never deletes, and stops its walk at, a segment this broker is copying.

After the plan, the run deletes segments left in COPY_SEGMENT_STARTED by a copy that can
never finish (the broker was killed mid-copy, or the copy failed outside the RSM): nothing
reads them, and without this their objects would stay in the store forever.
"""

from __future__ import annotations

import logging

from tierlog.log import PartitionLog
from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    ReplicaNotAvailableException,
    TopicIdPartition,
)
from tierlog.tiered.manager.expiration import ExpirationPlan, plan_expiration
from tierlog.tiered.manager.lineage import find_highest_remote_offset
from tierlog.tiered.manager.scheduling import PeriodicTask
from tierlog.tiered.manager.task_context import TaskContext, metric_labels

__all__ = ["ExpirationTask"]

log = logging.getLogger(__name__)

_S = RemoteLogSegmentState


class ExpirationTask(PeriodicTask):
    def __init__(self, lg: PartitionLog, tip: TopicIdPartition, ctx: TaskContext) -> None:
        super().__init__(f"expire {lg.tp}")
        self.log = lg
        self.tip = tip
        self._ctx = ctx
        self._labels = metric_labels(tip)

    def execute(self) -> None:
        try:
            self._expire()
        except ReplicaNotAvailableException as e:
            log.debug("%s: metadata not ready, expiration skipped: %s", self.tip, e)
        except Exception:
            log.exception("%s: remote expiration failed; retrying next run", self.tip)

    def _expire(self) -> None:
        if self.is_cancelled() or not self._ctx.rlmm.is_ready(self.tip):
            return
        being_copied = self._ctx.being_copied.snapshot()
        self._update_highest_remote_offset()
        plan = self._plan(being_copied)
        self._ctx.metrics.metadata_count.labels(*self._labels).set(plan.metadata_count)
        self._ctx.metrics.log_size_bytes.labels(*self._labels).set(plan.remote_size_bytes)
        if self.is_cancelled():
            return
        if plan.new_log_start_offset is not None:
            self.log.update_log_start_offset_from_remote(plan.new_log_start_offset)
        for md in plan.all_deletions:
            if self.is_cancelled():
                return
            self._delete_segment(md)
        self._delete_dangling_copies()

    def _update_highest_remote_offset(self) -> None:
        """The size rule counts local bytes above the highest tiered offset. Until the copy
        task of this leadership has run once (or when copy is disabled and there is none)
        that offset is still -1, and every tiered local segment would count twice; so it
        is derived here too (it only ever moves up)."""
        offset, _epoch = find_highest_remote_offset(
            self.log.leader_epoch_cache.entries(),
            self.log.log_end_offset,
            lambda e: self._ctx.rlmm.highest_offset_for_epoch(self.tip, e),
        )
        self.log.update_highest_offset_in_remote_storage(offset)

    def _plan(self, being_copied: frozenset[RemoteLogSegmentId]) -> ExpirationPlan:
        lg = self.log
        rlmm = self._ctx.rlmm
        segments = lg.segments()
        highest = lg.highest_offset_in_remote_storage
        return plan_expiration(
            all_segments=rlmm.list_remote_log_segments(self.tip),
            segments_for_epoch=lambda e: rlmm.list_remote_log_segments(self.tip, e),
            leader_epochs=lg.leader_epoch_cache.entries(),
            log_start_offset=lg.log_start_offset,
            log_end_offset=lg.log_end_offset,
            only_local_size_bytes=sum(s.size for s in segments if s.base_offset >= highest),
            retention_ms=lg.config.retention_ms,
            retention_bytes=lg.config.retention_bytes,
            now_ms=self._ctx.clock_ms(),
            being_copied=being_copied,
        )

    def _delete_dangling_copies(self) -> None:
        """Delete COPY_SEGMENT_STARTED segments that no copy on this broker holds.

        A copy running here is in ``being_copied`` from before its COPY_SEGMENT_STARTED
        until after its COPY_SEGMENT_FINISHED, so checking the set and *then* re-reading the
        state never touches a live or a finished copy."""
        rlmm = self._ctx.rlmm
        started = [
            s for s in rlmm.list_remote_log_segments(self.tip) if s.state is _S.COPY_SEGMENT_STARTED
        ]
        for md in started:
            if self.is_cancelled():
                return
            sid = md.remote_log_segment_id
            if sid in self._ctx.being_copied:
                continue
            current = next(
                (
                    s
                    for s in rlmm.list_remote_log_segments(self.tip)
                    if s.remote_log_segment_id == sid
                ),
                None,
            )
            if current is None or current.state is not _S.COPY_SEGMENT_STARTED:
                continue
            log.info(
                "%s: deleting dangling copy %s (%d..%d)",
                self.tip,
                sid.id,
                md.start_offset,
                md.end_offset,
            )
            self._delete_segment(current)

    def _delete_segment(self, md: RemoteLogSegmentMetadata) -> None:
        self._ctx.publish_state(md, _S.DELETE_SEGMENT_STARTED)
        self._ctx.metrics.delete_requests.labels(*self._labels).inc()
        try:
            self._ctx.rsm.delete_log_segment_data(md)
        except Exception:
            self._ctx.metrics.delete_errors.labels(*self._labels).inc()
            raise
        self._ctx.index_cache.remove(md.remote_log_segment_id.id)
        self._ctx.publish_state(md, _S.DELETE_SEGMENT_FINISHED)
