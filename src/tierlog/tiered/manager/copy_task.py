"""The copy task of one led partition (Kafka's ``RLMCopyTask``, spec §1.4).

Each run uploads the sealed local segments above the highest tiered offset, oldest first,
up to the last stable offset (``copy_plan`` chooses them). Per segment:

* COPY_SEGMENT_STARTED is durable (its future completed) before any byte is copied;
* the RSM copies the segment and its indexes;
* COPY_SEGMENT_FINISHED is durable before ``highest_offset_in_remote_storage`` moves, so a
  crash at any point never lets local retention delete a segment that is not remote.

A copy that fails in the RSM, or whose custom metadata is over
``remote.log.metadata.custom.metadata.max.bytes``, is deleted again (best effort) and never
reaches COPY_SEGMENT_FINISHED; oversized custom metadata also stops the task for good, as
Kafka does. A failed run backs off (``backoff``).

The task's state lives as long as one leadership: a new task re-derives the log start and
the highest tiered offset from the remote metadata on its first run, and so does a task
whose log moved to another directory.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from tierlog.log import PartitionLog, SegmentInfo
from tierlog.tiered.api import (
    CustomMetadataSizeLimitExceededException,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageException,
    ReplicaNotAvailableException,
    TopicIdPartition,
)
from tierlog.tiered.manager.backoff import RetryBackoff
from tierlog.tiered.manager.copy_plan import candidate_segments, copy_lag
from tierlog.tiered.manager.lineage import (
    EpochEntry,
    epoch_checkpoint_bytes,
    epoch_entries_in_range,
    find_highest_remote_offset,
    find_log_start_offset,
)
from tierlog.tiered.manager.metrics import RemoteMetrics
from tierlog.tiered.manager.quota import ByteRateQuota
from tierlog.tiered.manager.scheduling import PeriodicTask
from tierlog.tiered.manager.task_context import TaskContext, metric_labels

__all__ = ["QUOTA_WAIT_SLICE_S", "CopyTask", "CopyThrottle"]

log = logging.getLogger(__name__)

_S = RemoteLogSegmentState
QUOTA_WAIT_SLICE_S = 1.0


class CopyThrottle:
    """Back-pressure of every copy task on the broker-wide copy quota.

    A copier thread waits here, in slices of at most ``QUOTA_WAIT_SLICE_S``, until the copy
    rate allows the next segment; ``close`` wakes every waiter so that closing the manager
    is prompt. Owned and closed by the manager.
    """

    def __init__(self, quota: ByteRateQuota, metrics: RemoteMetrics) -> None:
        self.quota = quota
        self._metrics = metrics
        self._cv = threading.Condition()
        self._closed = False

    def wait(self, task: PeriodicTask) -> bool:
        """True once a segment may be copied; False if the task or the throttle closed."""
        with self._cv:
            while True:
                if task.is_cancelled() or self._closed:
                    return False
                throttle = self.quota.throttle_time_ms()
                if throttle <= 0:
                    return True
                self._metrics.copy_throttle_ms.observe(throttle)
                self._cv.wait(min(QUOTA_WAIT_SLICE_S, throttle / 1000))

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()


class CopyTask(PeriodicTask):
    def __init__(
        self,
        lg: PartitionLog,
        tip: TopicIdPartition,
        ctx: TaskContext,
        throttle: CopyThrottle,
        backoff: RetryBackoff,
    ) -> None:
        super().__init__(f"copy {lg.tp}")
        self.log = lg
        self.tip = tip
        #: the partition's back-off; it outlives the task (copy disabled and re-enabled)
        self.backoff = backoff
        self._ctx = ctx
        self._throttle = throttle
        self._labels = metric_labels(tip)
        self._copied_offset: int | None = None
        self._log_start_updated = False
        self._log_dir: Path | None = None
        self._fenced = threading.Event()

    def fence(self) -> None:
        """Leadership moved away: stop, and undo a copy in flight instead of finishing it,
        because the new leader uploads these offsets itself (no two COPY_SEGMENT_FINISHED
        segments for the same offsets in one lineage)."""
        self._fenced.set()
        self.cancel()

    def execute(self) -> None:
        if not self.backoff.ready(self._ctx.clock_ms()):
            return
        try:
            self._copy_log_segments()
        except ReplicaNotAvailableException as e:
            log.debug("%s: metadata not ready, copy skipped: %s", self.tip, e)
        except CustomMetadataSizeLimitExceededException as e:
            self._ctx.metrics.copy_errors.labels(*self._labels).inc()
            log.error("%s: %s; copying is stopped for this partition", self.tip, e)
            self.cancel()
        except Exception as e:
            if not self.is_cancelled():
                self._ctx.metrics.copy_errors.labels(*self._labels).inc()
                self._failed(e)
        else:
            self.backoff.succeeded()

    def _failed(self, e: Exception) -> None:
        """Back off; the first failure of a streak logs the stack, the rest one line."""
        delay = self.backoff.failed(self._ctx.clock_ms())
        if self.backoff.failures == 1:
            log.exception("%s: copy to remote storage failed; retrying in %d ms", self.tip, delay)
        else:
            log.warning(
                "%s: copy to remote storage failed again (%d in a row: %s); retrying in %d ms",
                self.tip,
                self.backoff.failures,
                e,
                delay,
            )

    # --- one run --------------------------------------------------------------------------

    def _copy_log_segments(self) -> None:
        lg = self.log
        if self.is_cancelled() or not self._ctx.rlmm.is_ready(self.tip):
            return
        if self._log_dir != lg.dir:
            self._copied_offset = None
            self._log_start_updated = False
            self._log_dir = lg.dir
        epochs = lg.leader_epoch_cache.entries()
        if not self._log_start_updated:
            self._update_log_start(epochs)
        copied = self._copied_offset
        if copied is None:
            copied = self._derive_copied_offset(epochs)
        lso = lg.last_stable_offset
        if lso > 0 and copied < lso:
            from_offset = max(copied + 1, lg.log_start_offset)
            if not self._copy_candidates(from_offset, lso):
                return
        if not self.is_cancelled():
            lag_bytes, lag_segments = copy_lag(lg.segments(), lg.highest_offset_in_remote_storage)
            self._ctx.metrics.copy_lag_bytes.labels(*self._labels).set(lag_bytes)
            self._ctx.metrics.copy_lag_segments.labels(*self._labels).set(lag_segments)

    def _update_log_start(self, epochs: Sequence[EpochEntry]) -> None:
        """The first run moves the log start to the earliest remote offset in the lineage."""
        start = find_log_start_offset(epochs, self._first_start, self._fallback_start())
        self.log.update_log_start_offset_from_remote(start)
        self._log_start_updated = True

    def _derive_copied_offset(self, epochs: Sequence[EpochEntry]) -> int:
        """The highest tiered offset, from the remote metadata of the log's epochs."""
        offset, _epoch = find_highest_remote_offset(
            epochs,
            self.log.log_end_offset,
            lambda e: self._ctx.rlmm.highest_offset_for_epoch(self.tip, e),
        )
        self.log.update_highest_offset_in_remote_storage(offset)
        self._copied_offset = offset
        return offset

    def _fallback_start(self) -> int:
        """The log start when no epoch of the leader-epoch cache finds a remote segment:
        the earliest remote segment, not the local start. A cache that lost its older
        entries (a corrupt checkpoint) would otherwise move the log start past everything
        tiered, and the expiration task would delete all of it as below the log start."""
        starts = [
            s.start_offset
            for s in self._ctx.rlmm.list_remote_log_segments(self.tip)
            if s.state is _S.COPY_SEGMENT_FINISHED
        ]
        local = self.log.local_log_start_offset
        return min(starts) if starts and min(starts) < local else local

    def _first_start(self, epoch: int) -> int | None:
        for s in self._ctx.rlmm.list_remote_log_segments(self.tip, epoch):
            return s.start_offset
        return None

    def _copy_candidates(self, from_offset: int, lso: int) -> bool:
        """Copy the candidate segments in order; False if cancelled or closed on the way."""
        config = self._ctx.config
        candidates = candidate_segments(
            self.log.segments(),
            from_offset,
            lso,
            now_ms=self._ctx.clock_ms(),
            lag_ms=config.copy_lag_ms,
            lag_bytes=config.copy_lag_bytes,
        )
        for seg in candidates:
            if self.is_cancelled() or not self._throttle.wait(self):
                return False
            self._throttle.quota.record(seg.size)
            sid = RemoteLogSegmentId.generate_new(self.tip)
            with self._ctx.being_copied.holding(sid):
                self._copy_segment(seg.base_offset, seg.next_offset, seg.size, sid)
        return True

    # --- one segment ----------------------------------------------------------------------

    def _copy_segment(self, base: int, next_base: int, size: int, sid: RemoteLogSegmentId) -> None:
        lg = self.log
        segs = {s.base_offset: s for s in lg.segments()}
        seg = segs.get(base)
        if seg is None:
            return  # deleted locally since planning (log start moved past it)
        epochs = lg.leader_epoch_cache.entries()
        txn = seg.txn_index_path if seg.txn_index_path.exists() else None
        md = self._started_metadata(seg, next_base, size, sid, epochs, txn)
        self._ctx.rlmm.add_remote_log_segment_metadata(md).result()
        data = LogSegmentData(
            log_segment=seg.log_path,
            offset_index=seg.offset_index_path,
            time_index=seg.time_index_path,
            transaction_index=txn,
            producer_snapshot_index=lg.producer_snapshot_for(next_base),
            leader_epoch_index=epoch_checkpoint_bytes(e for e in epochs if e[1] < next_base),
        )
        self._ctx.metrics.copy_requests.labels(*self._labels).inc()
        try:
            custom = self._ctx.rsm.copy_log_segment_data(md, data)
        except RemoteStorageException:
            self._best_effort_delete(md)
            raise
        if self._fenced.is_set():
            log.info("%s: leadership moved during the copy of %s; undoing it", self.tip, sid)
            self._best_effort_delete(md)
            return
        limit = self._ctx.config.custom_metadata_max_bytes
        if custom is not None and len(custom) > limit:
            finished = md.create_with_updates(
                self._ctx.segment_update(md, _S.COPY_SEGMENT_FINISHED, custom)
            )
            self._best_effort_delete(finished)
            raise CustomMetadataSizeLimitExceededException(
                f"custom metadata of {len(custom)} bytes for {sid} exceeds "
                f"remote.log.metadata.custom.metadata.max.bytes={limit}"
            )
        self._ctx.rlmm.update_remote_log_segment_metadata(
            self._ctx.segment_update(md, _S.COPY_SEGMENT_FINISHED, custom)
        ).result()
        self._ctx.metrics.copy_bytes.labels(*self._labels).inc(size)
        self._copied_offset = next_base - 1
        lg.update_highest_offset_in_remote_storage(next_base - 1)

    def _started_metadata(
        self,
        seg: SegmentInfo,
        next_base: int,
        size: int,
        sid: RemoteLogSegmentId,
        epochs: Sequence[EpochEntry],
        txn: Path | None,
    ) -> RemoteLogSegmentMetadata:
        """The COPY_SEGMENT_STARTED event of ``seg``, with the epochs its offsets span."""
        base = seg.base_offset
        seg_epochs = epoch_entries_in_range(epochs, base, next_base)
        if not seg_epochs:
            raise RemoteStorageException(f"{self.tip}: no leader epoch covers offsets {base}..")
        return RemoteLogSegmentMetadata(
            remote_log_segment_id=sid,
            start_offset=base,
            end_offset=next_base - 1,
            max_timestamp_ms=seg.largest_timestamp,
            broker_id=self._ctx.config.broker_id,
            event_timestamp_ms=self._ctx.clock_ms(),
            segment_size_in_bytes=size,
            custom_metadata=None,
            state=_S.COPY_SEGMENT_STARTED,
            segment_leader_epochs=dict(seg_epochs),
            txn_idx_empty=txn is None or txn.stat().st_size == 0,
        )

    def _best_effort_delete(self, md: RemoteLogSegmentMetadata) -> None:
        """Undo a copy that will never be COPY_FINISHED; failures are logged, not raised."""
        try:
            self._ctx.publish_state(md, _S.DELETE_SEGMENT_STARTED)
            self._ctx.rsm.delete_log_segment_data(md)
            self._ctx.publish_state(md, _S.DELETE_SEGMENT_FINISHED)
        except Exception:
            log.exception("cleanup of failed copy %s failed", md.remote_log_segment_id)
