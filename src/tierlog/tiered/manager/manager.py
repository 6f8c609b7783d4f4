"""RemoteLogManager: moves sealed segments to the remote tier, expires them, reads them back.

The manager owns the lifecycle and the scheduling of the per-partition tasks (spec §1.4,
§1.5, §1.7), each a fixed-delay ``PeriodicTask`` on the manager's own pools:

* leaders get a ``CopyTask`` (unless ``remote.log.copy.disable``) and an
  ``ExpirationTask``;
* followers get a ``FollowerTask`` that only tracks the highest uploaded offset.

The tasks hold their own rules (``copy_task``, ``expiration_task``, ``follower_task``); they
reach the plugins, the metrics and the index cache through the manager's ``TaskContext``.

Threads and the log: RSM and RLMM calls block, so every task and every remote read runs on
the manager's own pools (see ``scheduling``), never on the asyncio loop. ``PartitionLog``
is thread-safe (each mutation holds the log's own lock and readers snapshot under it), so
worker threads call it directly: ``segments()``, offsets, ``producer_snapshot_for``,
``update_highest_offset_in_remote_storage`` and ``update_log_start_offset_from_remote``.
No hop to the loop is needed, and ``close()`` cannot deadlock against a loop that waits
for it.

The manager owns the two plugins it is given and closes them in ``close()``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from tierlog.log import PartitionLog, TopicPartition
from tierlog.log.txn_index import AbortedTxn
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import batch_size_at
from tierlog.tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    RemoteStorageManager,
    ReplicaNotAvailableException,
    TopicIdPartition,
)
from tierlog.tiered.manager.abandoned_reads import AbandonedReads
from tierlog.tiered.manager.aux_state import SegmentAuxState, read_segment_aux_state
from tierlog.tiered.manager.backoff import RetryBackoff
from tierlog.tiered.manager.config import RemoteLogManagerConfig
from tierlog.tiered.manager.copy_task import CopyTask, CopyThrottle
from tierlog.tiered.manager.expiration_task import ExpirationTask
from tierlog.tiered.manager.follower_task import FollowerTask
from tierlog.tiered.manager.index_cache import CacheStats, RemoteIndexCache
from tierlog.tiered.manager.lineage import epoch_for_offset
from tierlog.tiered.manager.metrics import RemoteMetrics
from tierlog.tiered.manager.quota import ByteRateQuota, QuotaConfig, wall_clock_ms
from tierlog.tiered.manager.reader import (
    SEARCH_LOCAL,
    RemoteOffsetOutOfRange,
    RemoteReadData,
    RemoteReader,
    RemoteReadSpec,
)
from tierlog.tiered.manager.scheduling import (
    BoundedExecutor,
    PeriodicTask,
    RejectedExecution,
    TaskScheduler,
)
from tierlog.tiered.manager.task_context import TaskContext, metric_labels

__all__ = ["RemoteFetchRequest", "RemoteFetchResult", "RemoteLogManager", "StopPartition"]

log = logging.getLogger(__name__)

#: How long deleting an untracked partition's remote data waits for its metadata to load
#: again in the RLMM (a replay of one metadata partition; the topic deletion waits for it).
UNTRACKED_DELETE_WAIT_S = 30.0

_S = RemoteLogSegmentState


@dataclass(frozen=True)
class RemoteFetchRequest:
    """One partition of a consumer Fetch whose offset is below the local log start."""

    log: PartitionLog
    fetch_offset: int
    max_bytes: int
    min_one_message: bool = True
    read_committed: bool = False


@dataclass(frozen=True)
class RemoteFetchResult:
    """``error`` NONE with empty ``records`` means "nothing now, fetch again" (throttled,
    timed out, or past the byte budget); HW and log start come from the caller's local read."""

    request: RemoteFetchRequest
    error: ErrorCode = ErrorCode.NONE
    records: bytes | memoryview = b""
    aborted_transactions: list[AbortedTxn] | None = None
    throttled: bool = False
    error_message: str = ""


@dataclass(frozen=True)
class StopPartition:
    log: PartitionLog
    delete_remote_log: bool = False
    #: publish the partition-delete records (MARKED, STARTED, FINISHED) after the segments:
    #: for a deleted topic only. Tiering turned off keeps the partition, and those records
    #: would end its metadata for good (a later re-enable could never tier it again).
    partition_deleted: bool = True


@dataclass
class _Partition:
    """A tiered partition tracked here and its tasks; ``copy_backoff`` outlives the copy
    task (copy disabled and enabled again keeps the partition's back-off)."""

    log: PartitionLog
    tip: TopicIdPartition
    copy_backoff: RetryBackoff
    copy_task: CopyTask | None = None
    expiration_task: ExpirationTask | None = None
    follower_task: FollowerTask | None = None
    predecessors: dict[str, PeriodicTask] = field(default_factory=dict)
    """Cancelled tasks (by kind) whose replacements must not overlap their last run."""

    @property
    def labels(self) -> tuple[str, str]:
        return metric_labels(self.tip)

    def tasks(self) -> list[PeriodicTask]:
        return [
            t for t in (self.copy_task, self.expiration_task, self.follower_task) if t is not None
        ]


class RemoteLogManager:
    def __init__(
        self,
        config: RemoteLogManagerConfig,
        rsm: RemoteStorageManager,
        rlmm: RemoteLogMetadataManager,
        log_dir: Path,
        *,
        metrics: RemoteMetrics | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.rsm = rsm
        self.rlmm = rlmm
        self.metrics = metrics if metrics is not None else RemoteMetrics()
        self._clock = clock_ms
        self.index_cache = RemoteIndexCache(
            log_dir,
            rsm,
            config.index_cache_total_size_bytes,
            ttl_ms=config.index_cache_ttl_ms,
        )
        self.reader = RemoteReader(rlmm, rsm, self.index_cache)
        self._abandoned: AbandonedReads[RemoteReadSpec, RemoteFetchResult] = AbandonedReads(
            self._unclaimed
        )
        self.metrics.attach_index_cache(self._cache_stats)
        self.copy_quota = ByteRateQuota(
            QuotaConfig(
                config.copy_max_bytes_per_second,
                config.copy_quota_window_num,
                config.copy_quota_window_size_seconds,
            )
        )
        self.fetch_quota = ByteRateQuota(
            QuotaConfig(
                config.fetch_max_bytes_per_second,
                config.fetch_quota_window_num,
                config.fetch_quota_window_size_seconds,
            )
        )
        self._copier = ThreadPoolExecutor(config.copier_pool_size, "rlm-copier")
        self._expirer = ThreadPoolExecutor(config.expiration_pool_size, "rlm-expiration")
        self._follower = ThreadPoolExecutor(config.thread_pool_size, "rlm-follower")
        self._readers = BoundedExecutor(
            config.reader_threads, config.reader_max_pending_tasks, "remote-log-reader"
        )
        self._scheduler = TaskScheduler(config.task_interval_ms)
        self._copy_throttle = CopyThrottle(self.copy_quota, self.metrics)
        self._task_ctx = TaskContext(config, rsm, rlmm, self.metrics, self.index_cache, clock_ms)
        self._lock = threading.RLock()
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._started = False
        self._closed = False
        self._first_delay_s = config.initial_task_delay_ms / 1000

    # --- lifecycle --------------------------------------------------------------------

    def startup(self) -> None:
        self._started = True

    def close(self) -> None:
        """Idempotent and prompt: cancels tasks, wakes quota waiters, then closes plugins."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            tasks = [t for p in self._partitions.values() for t in p.tasks()]
        for t in tasks:
            t.cancel()
        self._copy_throttle.close()
        self._scheduler.close()
        for pool in (self._copier, self._expirer, self._follower):
            pool.shutdown(wait=False, cancel_futures=True)
        self._readers.shutdown()
        deadline = time.monotonic() + 5.0
        for t in tasks:
            t.idle.wait(max(0.0, deadline - time.monotonic()))
        self.reader.close()
        self.index_cache.close()
        for plugin in (self.rsm, self.rlmm):
            try:
                plugin.close()
            except Exception:
                log.exception("closing %s failed", type(plugin).__name__)

    @property
    def closed(self) -> bool:
        return self._closed

    def _cache_stats(self) -> tuple[CacheStats, int]:
        return self.index_cache.stats, self.index_cache.total_bytes

    # --- leadership -------------------------------------------------------------------

    def on_leadership_change(
        self,
        leaders: Iterable[PartitionLog],
        followers: Iterable[PartitionLog] = (),
        *,
        restart: bool = False,
    ) -> None:
        """Install the tasks for tiered partitions this broker now leads or follows.

        ``restart`` (a new leader epoch in cluster mode): the partition's tasks are cancelled
        and started again, so a new leader re-derives its state from the remote metadata of
        its own epoch lineage, and the copy lag metrics start again at 0."""
        if not self._started:
            raise RuntimeError("RemoteLogManager.on_leadership_change called before startup()")
        lead = [p for lg in leaders if lg.remote_enabled and (p := self._track(lg)) is not None]
        follow = [p for lg in followers if lg.remote_enabled and (p := self._track(lg)) is not None]
        if not lead and not follow:
            return
        self.rlmm.on_partition_leadership_changes({p.tip for p in lead}, {p.tip for p in follow})
        for p in (*follow, *lead):
            if restart:
                self._cancel_tasks(p)
        for p in follow:
            self._become_follower(p)
        for p in lead:
            self._become_leader(p)

    def _cancel_tasks(self, p: _Partition) -> None:
        """Cancel every task of ``p`` (their replacements wait for a run in flight)."""
        with self._lock:
            if p.copy_task is not None:
                p.copy_task.fence()
            for name in ("copy_task", "expiration_task", "follower_task"):
                task: PeriodicTask | None = getattr(p, name)
                if task is not None:
                    task.cancel()
                    p.predecessors[name] = task
            p.copy_task = p.expiration_task = p.follower_task = None
            self.metrics.copy_lag_bytes.labels(*p.labels).set(0)
            self.metrics.copy_lag_segments.labels(*p.labels).set(0)

    def _schedule(
        self, p: _Partition, name: str, task: PeriodicTask, pool: ThreadPoolExecutor
    ) -> None:
        task.after = p.predecessors.pop(name, None)
        self._scheduler.schedule(task, pool, self._first_delay_s)

    def _track(self, lg: PartitionLog) -> _Partition | None:
        if lg.topic_id is None:
            log.warning("%s has no topic id; it cannot be tiered", lg.tp)
            return None
        tip = TopicIdPartition(lg.topic_id, lg.tp.topic, lg.tp.partition)
        with self._lock:
            p = self._partitions.get(lg.tp)
            if p is None or p.tip != tip or p.log is not lg:
                if p is not None:
                    for t in p.tasks():
                        t.cancel()
                c = self.config
                backoff = RetryBackoff(c.retry_backoff_ms, c.retry_backoff_max_ms, c.retry_jitter)
                p = _Partition(lg, tip, backoff)
                self._partitions[lg.tp] = p
            return p

    def _become_leader(self, p: _Partition) -> None:
        with self._lock:
            if p.follower_task is not None:
                p.follower_task.cancel()
                p.follower_task = None
            if p.expiration_task is None or p.expiration_task.is_cancelled():
                p.expiration_task = ExpirationTask(p.log, p.tip, self._task_ctx)
                self._schedule(p, "expiration_task", p.expiration_task, self._expirer)
            self._sync_copy_task(p)

    def _sync_copy_task(self, p: _Partition) -> None:
        """Copy runs iff the partition is led here, tiered, and copy is not disabled."""
        with self._lock:
            wanted = (
                p.expiration_task is not None
                and p.log.remote_enabled
                and not p.log.config.remote_log_copy_disable
            )
            running = p.copy_task is not None and not p.copy_task.is_cancelled()
            if wanted and not running:
                p.copy_task = CopyTask(
                    p.log, p.tip, self._task_ctx, self._copy_throttle, p.copy_backoff
                )
                self._schedule(p, "copy_task", p.copy_task, self._copier)
            elif not wanted and running:
                assert p.copy_task is not None
                p.copy_task.cancel()
                p.copy_task = None

    def _become_follower(self, p: _Partition) -> None:
        with self._lock:
            if p.copy_task is not None:
                p.copy_task.fence()
            for t in (p.copy_task, p.expiration_task):
                if t is not None:
                    t.cancel()
            p.copy_task = p.expiration_task = None
            self.metrics.copy_lag_bytes.labels(*p.labels).set(0)
            self.metrics.copy_lag_segments.labels(*p.labels).set(0)
            if p.follower_task is None or p.follower_task.is_cancelled():
                p.follower_task = FollowerTask(p.log, p.tip, self._task_ctx)
                self._schedule(p, "follower_task", p.follower_task, self._follower)

    def on_config_change(self, lg: PartitionLog) -> None:
        """Apply a changed topic config: copy disable/enable, or tiering newly enabled.

        Turning tiering off is ``disable_remote`` (it deletes remote data and blocks)."""
        with self._lock:
            p = self._partitions.get(lg.tp)
        if p is None:
            if lg.remote_enabled and self._started:
                self.on_leadership_change([lg])
            return
        self._sync_copy_task(p)

    def stop_partitions(self, stops: Iterable[StopPartition]) -> None:
        """Cancel tasks; with ``delete_remote_log`` also delete the remote data (blocking:
        call it off the loop, e.g. ``await asyncio.to_thread(...)``)."""
        stopped: set[TopicIdPartition] = set()
        errors: list[Exception] = []
        try:
            for stop in stops:
                # every partition is stopped even if deleting an earlier one's remote data
                # failed: otherwise the rest keep copy tasks running on deleted logs
                with self._lock:
                    p = self._partitions.pop(stop.log.tp, None)
                tip = None if p is None else p.tip
                if p is not None:
                    for t in p.tasks():
                        t.cancel()
                    for t in p.tasks():
                        t.idle.wait(30)
                    self.metrics.remove_partition(p.tip.topic, p.tip.partition)
                    stopped.add(p.tip)
                elif stop.log.topic_id is not None:
                    tip = TopicIdPartition(stop.log.topic_id, *stop.log.tp)
                if stop.delete_remote_log and tip is not None:
                    try:
                        if p is None:
                            self._delete_untracked(tip, stop.partition_deleted)
                        else:
                            self.delete_remote_partition(tip, stop.partition_deleted)
                    except Exception as e:
                        log.warning("%s: deleting the remote log failed: %s", tip, e)
                        errors.append(e)
        finally:
            if stopped:
                self.rlmm.on_stop_partitions(stopped)
        if errors:
            raise errors[0]

    def _delete_untracked(self, tip: TopicIdPartition, partition_deleted: bool) -> None:
        """Delete the remote data of a partition this manager no longer tracks: another stop
        (the replica stopping as its topic goes) can pop it and release its metadata in the
        RLMM just before the deletion. The metadata is assigned again for the deletion and
        released after it, so the remote data is not left behind."""
        self.rlmm.on_partition_leadership_changes({tip}, set())
        try:
            deadline = time.monotonic() + UNTRACKED_DELETE_WAIT_S
            while True:
                try:
                    self.delete_remote_partition(tip, partition_deleted)
                    return
                except (RemoteResourceNotFoundException, ReplicaNotAvailableException):
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.05)
        finally:
            self.rlmm.on_stop_partitions({tip})

    def disable_remote(self, lg: PartitionLog) -> None:
        """``remote.storage.enable`` turned off with ``remote.log.delete.on.disable=true``:
        delete every remote segment, then raise the log start offset to the local start."""
        if not lg.config.remote_log_delete_on_disable:
            raise ValueError(
                "remote.storage.enable=false requires remote.log.delete.on.disable=true"
            )
        self.stop_partitions([StopPartition(lg, delete_remote_log=True, partition_deleted=False)])
        lg.delete_records(lg.local_log_start_offset)

    def delete_remote_partition(
        self, tip: TopicIdPartition, partition_deleted: bool = True
    ) -> None:
        """Topic deletion: DELETE_STARTED for every segment, the RSM deletes, DELETE_FINISHED
        for every segment, then (``partition_deleted``) the partition-delete records
        (MARKED, STARTED, FINISHED)."""
        segments = [
            s
            for s in self.rlmm.list_remote_log_segments(tip)
            if s.state is not _S.DELETE_SEGMENT_FINISHED
        ]
        self._task_ctx.publish_all(segments, _S.DELETE_SEGMENT_STARTED)
        labels = (tip.topic, str(tip.partition))
        for s in segments:
            self.metrics.delete_requests.labels(*labels).inc()
            try:
                self.rsm.delete_log_segment_data(s)
            except Exception:
                self.metrics.delete_errors.labels(*labels).inc()
                raise
        self.index_cache.remove_all(s.remote_log_segment_id.id for s in segments)
        self._task_ctx.publish_all(segments, _S.DELETE_SEGMENT_FINISHED)
        if not partition_deleted:
            return
        for state in RemotePartitionDeleteState:
            self.rlmm.put_remote_partition_delete_metadata(
                RemotePartitionDeleteMetadata(tip, state, self._clock(), self.config.broker_id)
            ).result()

    # --- follower bootstrap -----------------------------------------------------------------

    def segment_aux_state(self, lg: PartitionLog, epoch: int, offset: int) -> SegmentAuxState:
        """The leader-epoch checkpoint and producer snapshot of the remote segment holding
        ``(epoch, offset)``, for a follower that restarts its log after it (blocking).
        Counted in the BuildRemoteLogAuxState request and error metrics."""
        labels = (lg.tp.topic, str(lg.tp.partition))
        self.metrics.build_aux_state_requests.labels(*labels).inc()
        try:
            return read_segment_aux_state(self.rlmm, self.rsm, lg, epoch, offset)
        except Exception:
            self.metrics.build_aux_state_errors.labels(*labels).inc()
            raise

    # --- remote reads (called from the event loop) --------------------------------------

    def fetch_throttle_time_ms(self) -> int:
        return self.fetch_quota.throttle_time_ms()

    async def read_remote(
        self, requests: Sequence[RemoteFetchRequest], fetch_max_bytes: int
    ) -> list[RemoteFetchResult]:
        """Read every remote partition of one Fetch concurrently (beyond Kafka: KAFKA-14915).

        Each partition gets ``min(its max bytes, what is left of fetch_max_bytes)``, counted
        up front so the concurrent reads together stay within the budget; only the first may
        return one batch larger than that. Over the fetch quota every partition is shed (empty,
        no error). A full reader queue fails only that partition. Reads not done within
        ``remote.fetch.max.wait.ms`` (or ``remote.fetch.partial.wait.ms`` after others had
        records, ``_wait_for_reads``) come back empty without error; they go on, and the
        next Fetch at their offset gets what they read (``abandoned_reads``).
        """
        results: list[RemoteFetchResult | None] = [None] * len(requests)
        reads: dict[int, tuple[Future[RemoteFetchResult], RemoteReadSpec | None]] = {}
        adopted: dict[int, RemoteReadSpec] = {}  # what an adopted read was asked
        throttle = self.fetch_quota.throttle_time_ms()
        if throttle > 0:
            self.metrics.fetch_throttle_ms.observe(throttle)
            return [RemoteFetchResult(r, throttled=True) for r in requests]
        remaining = fetch_max_bytes
        waiting: dict[asyncio.Future[RemoteFetchResult], int] = {}
        loop = asyncio.get_running_loop()
        for i, req in enumerate(requests):
            budget = min(req.max_bytes, remaining)
            first = not waiting and all(r is None for r in results[:i])
            min_one = req.min_one_message and first
            if budget <= 0 and not min_one:
                results[i] = RemoteFetchResult(req)
                continue
            remaining -= max(budget, 0)
            spec = self._spec(req, max(budget, 0), min_one)
            on_loop = None if spec is None else self._read_on_loop(req, spec, loop)
            if isinstance(on_loop, RemoteFetchResult):
                results[i] = on_loop
                continue
            if on_loop is not None:
                waiting[on_loop] = i
                continue
            started = self._read_off_loop(req, spec)
            if isinstance(started, RemoteFetchResult):
                results[i] = started
                continue
            fut, asked = started
            if asked is not None:
                adopted[i] = asked
            reads[i] = (fut, spec)
            waiting[asyncio.wrap_future(fut)] = i
        if waiting:
            have_records = any(r is not None and r.records for r in results)
            pending = await self._wait_for_reads(set(waiting), have_records)
            for f, i in waiting.items():
                if f in pending:
                    self.metrics.fetch_expires.labels(*_labels(requests[i])).inc()
                    if i in reads:
                        fut, spec = reads[i]
                        if not fut.cancel() and spec is not None:  # running: it cannot stop
                            self._abandoned.keep(spec.tip, *_read_key(spec), spec, fut)
                    f.cancel()  # a read waiting on the loop for its chunk has taken nothing
                    results[i] = RemoteFetchResult(requests[i])
                elif i in adopted:
                    results[i] = self._answer_adopted(
                        requests[i], reads[i][1], adopted[i], f.result()
                    )
                else:
                    results[i] = f.result()
        return [
            r if r is not None else RemoteFetchResult(requests[i]) for i, r in enumerate(results)
        ]

    def _read_on_loop(
        self, req: RemoteFetchRequest, spec: RemoteReadSpec, loop: asyncio.AbstractEventLoop
    ) -> RemoteFetchResult | asyncio.Future[RemoteFetchResult] | None:
        """The read answered on the loop: now (``_read_ready``), or once the chunk its
        cursor needs has landed (``_ready_later``, a task of the loop); None if it has to go
        to the reader pool."""
        landed: asyncio.Future[None] = loop.create_future()
        ready, arranged = self._read_ready(req, spec, functools.partial(_set_soon, loop, landed))
        if ready is not None:
            return ready
        return asyncio.ensure_future(self._ready_later(req, spec, landed)) if arranged else None

    def _read_off_loop(
        self, req: RemoteFetchRequest, spec: RemoteReadSpec | None
    ) -> tuple[Future[RemoteFetchResult], RemoteReadSpec | None] | RemoteFetchResult:
        """A read the loop cannot answer, on the reader pool: the one an earlier Fetch gave
        up on at this offset (with what that one was asked), or a new one; the error if the
        pool refuses it."""
        taken = None if spec is None else self._abandoned.adopt(spec.tip, *_read_key(spec))
        if taken is not None:
            self.metrics.fetch_taken_over.labels(*_labels(req)).inc()
            asked, fut = taken
            return fut, asked
        try:
            return self._readers.submit(self._read_one, req, spec), None
        except (RejectedExecution, RuntimeError) as e:
            return RemoteFetchResult(req, ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(e))

    async def _wait_for_reads(
        self, reads: set[asyncio.Future[RemoteFetchResult]], have_records: bool
    ) -> set[asyncio.Future[RemoteFetchResult]]:
        """Wait for a Fetch's remote reads; the ones not done in time. All of them get
        ``remote.fetch.max.wait.ms``, but once the Fetch has records from some (served on
        the loop, or a read that ended), the others only ``remote.fetch.partial.wait.ms``
        more. One consumer's partitions share its Fetches: waiting for the slowest stalls
        the others, whose loaded chunks then hold the read-ahead budget the slow one's GETs
        need. A read left behind goes on, and the next Fetch there takes it over."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.remote_fetch_max_wait_ms / 1000
        partial_s = self.config.remote_fetch_partial_wait_ms / 1000
        if have_records:
            deadline = min(deadline, loop.time() + partial_s)
        pending = reads
        while pending:
            timeout = deadline - loop.time()
            if timeout <= 0:
                break
            done, pending = await asyncio.wait(
                pending,
                timeout=timeout,
                return_when=asyncio.ALL_COMPLETED if have_records else asyncio.FIRST_COMPLETED,
            )
            if not have_records and any(_has_records(f) for f in done):
                have_records = True
                deadline = min(deadline, loop.time() + partial_s)
        return pending

    @property
    def abandoned_reads(self) -> int:
        """Remote reads that a Fetch stopped waiting for and that still run."""
        return len(self._abandoned)

    def _answer_adopted(
        self,
        req: RemoteFetchRequest,
        spec: RemoteReadSpec | None,
        asked: RemoteReadSpec,
        result: RemoteFetchResult,
    ) -> RemoteFetchResult:
        """What a read an earlier Fetch gave up on answers this one: its result as is when
        it fits this Fetch's budget; else its records go back to its cursor, and this Fetch
        gets what the cursor serves within its own limits (``read_ready``), or nothing now,
        the next Fetch there then served from the cursor."""
        records = result.records
        if spec is None or result.error is not ErrorCode.NONE or not records:
            return replace(result, request=req)
        one_batch = batch_size_at(records) == len(records)
        if len(records) <= spec.max_bytes or (spec.min_one_message and one_batch):
            return replace(result, request=req)
        self._unclaimed(asked, result)
        ready, _ = self._read_ready(req, spec)
        return ready if ready is not None else RemoteFetchResult(req)

    def _unclaimed(self, spec: RemoteReadSpec, result: RemoteFetchResult) -> None:
        """A read given up on whose records no Fetch will send (it ended before a Fetch
        took it over, or they do not fit the one that did): they go back to its cursor
        (``RemoteReader.unread``)."""
        if result.error is ErrorCode.NONE and result.records:
            self.reader.unread(spec, result.records)

    def _spec(self, req: RemoteFetchRequest, budget: int, min_one: bool) -> RemoteReadSpec | None:
        lg = req.log
        if lg.topic_id is None:
            return None
        return RemoteReadSpec(
            TopicIdPartition(lg.topic_id, lg.tp.topic, lg.tp.partition),
            req.fetch_offset,
            budget,
            min_one,
            lg.leader_epoch_cache.entries(),
            req.read_committed,
            lambda start, upper: lg.collect_aborted_txns(start, upper, from_start=True)[0],
        )

    def _read_ready(
        self,
        req: RemoteFetchRequest,
        spec: RemoteReadSpec,
        on_readable: Callable[[], None] | None = None,
    ) -> tuple[RemoteFetchResult | None, bool]:
        """The read answered on the event loop when a parked cursor already holds it
        (``RemoteReader.read_ready``); None: it goes to the reader pool, unless the chunk
        the cursor needs is on its way and ``on_readable`` was arranged (True)."""
        data, arranged = self.reader.read_ready(spec, on_readable)
        if data is None:
            return None, arranged
        labels = _labels(req)
        self.metrics.fetch_requests.labels(*labels).inc()
        self.metrics.fetch_ready.labels(*labels).inc()
        return self._served(req, data), False

    async def _ready_later(
        self, req: RemoteFetchRequest, spec: RemoteReadSpec, landed: asyncio.Future[None]
    ) -> RemoteFetchResult:
        """A read whose parked cursor waits for a chunk already on its way: answered on the
        loop once that chunk's GET ends, with no reader thread blocked on it meanwhile (one
        consumer's partitions are read in step, so most of its Fetches find some partition
        a chunk short). Empty if the cursor still cannot answer then (its GET failed, or
        another read took the cursor): the next Fetch reads it the ordinary way."""
        await landed
        ready, _ = self._read_ready(req, spec)
        return ready if ready is not None else RemoteFetchResult(req)

    def _read_one(self, req: RemoteFetchRequest, spec: RemoteReadSpec | None) -> RemoteFetchResult:
        """The read on the reader pool, with the spec the event loop built (None: the log
        has no topic id)."""
        lg = req.log
        labels = _labels(req)
        self.metrics.fetch_requests.labels(*labels).inc()
        if spec is None:
            return RemoteFetchResult(req, ErrorCode.UNKNOWN_TOPIC_ID)
        try:
            data = self.reader.read(spec)
        except RemoteOffsetOutOfRange as e:
            self.fetch_quota.record(0)
            return RemoteFetchResult(req, ErrorCode.OFFSET_OUT_OF_RANGE, error_message=e.message)
        except Exception as e:
            self.fetch_quota.record(0)
            self.metrics.fetch_errors.labels(*labels).inc()
            log.warning("%s: remote read at %d failed: %r", lg.tp, req.fetch_offset, e)
            code = e.code if isinstance(e, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            return RemoteFetchResult(req, code, error_message=str(e))
        return self._served(req, data)

    def _served(self, req: RemoteFetchRequest, data: RemoteReadData) -> RemoteFetchResult:
        self.fetch_quota.record(len(data.records))
        self.metrics.fetch_bytes.labels(*_labels(req)).inc(len(data.records))
        return RemoteFetchResult(
            req, records=data.records, aborted_transactions=data.aborted_transactions
        )

    # --- ListOffsets --------------------------------------------------------------------------

    async def offset_for_timestamp(
        self, lg: PartitionLog, timestamp: int, timeout_ms: int | None = None
    ) -> tuple[int, int, int | None] | None:
        """First offset with timestamp >= ``timestamp`` across both tiers, as the log's
        ``offset_for_timestamp`` shape ``(offset, timestamp, leader epoch)``.

        Remote indexes are consulted only when the data is no longer local; the lookup runs
        on the reader pool. Raises ``KafkaError`` REQUEST_TIMED_OUT after the timeout
        (``remote.list.offsets.request.timeout.ms`` by default) and UNKNOWN_SERVER_ERROR
        when the reader queue is full.
        """
        if not lg.remote_enabled or lg.topic_id is None:
            return lg.offset_for_timestamp(timestamp)
        try:
            fut = self._readers.submit(self._timestamp_lookup, lg, timestamp)
        except RejectedExecution as e:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
        wait_ms = timeout_ms if timeout_ms else self.config.list_offsets_timeout_ms
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), wait_ms / 1000)
        except TimeoutError as e:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "remote offset lookup timed out") from e

    def _timestamp_lookup(
        self, lg: PartitionLog, timestamp: int
    ) -> tuple[int, int, int | None] | None:
        assert lg.topic_id is not None
        found = self.reader.find_offset_by_timestamp(
            tip=TopicIdPartition(lg.topic_id, lg.tp.topic, lg.tp.partition),
            timestamp=timestamp,
            starting_offset=lg.log_start_offset,
            epochs=lg.leader_epoch_cache.entries(),
            log_end_offset=lg.log_end_offset,
            first_local_base_offset=lg.local_log_start_offset if lg.size > 0 else None,
        )
        if found is None or found is SEARCH_LOCAL:
            return lg.offset_for_timestamp(timestamp)
        assert isinstance(found, tuple)
        ts, offset, epoch = found
        return offset, ts, epoch

    # --- introspection (tests, CLI) -----------------------------------------------------------

    def run_now(self, tp: TopicPartition, kind: str) -> None:
        """Run one task body (``copy``, ``expiration`` or ``follower``) on the caller's thread."""
        task = self.tasks_of(tp).get(kind)
        if task is None:
            raise KeyError(f"no active {kind} task for {tp}")
        with self._lock:
            p = self._partitions.get(tp)
        if kind == "copy" and p is not None:
            p.copy_backoff.succeeded()  # an explicit run is not held back by a back-off
        task.run_once()

    def tasks_of(self, tp: TopicPartition) -> dict[str, PeriodicTask]:
        with self._lock:
            p = self._partitions.get(tp)
            if p is None:
                return {}
            out: dict[str, PeriodicTask] = {}
            for name, t in (
                ("copy", p.copy_task),
                ("expiration", p.expiration_task),
                ("follower", p.follower_task),
            ):
                if t is not None and not t.is_cancelled():
                    out[name] = t
            return out


def earliest_local_offset(lg: PartitionLog) -> tuple[int, int | None]:
    """ListOffsets -4 (EARLIEST_LOCAL, v8+): the local log start and its epoch."""
    off = lg.local_log_start_offset
    return off, epoch_for_offset(lg.leader_epoch_cache.entries(), off)


def latest_tiered_offset(lg: PartitionLog) -> tuple[int, int | None]:
    """ListOffsets -5 (LATEST_TIERED, v9+): highest uploaded offset; (-1, -1) if none or if
    the partition is not tiered; epoch None when the offset's epoch is unknown."""
    if not lg.remote_enabled:
        return -1, -1
    off = lg.highest_offset_in_remote_storage
    epoch = epoch_for_offset(lg.leader_epoch_cache.entries(), off)
    if epoch is None and off == -1:
        return -1, -1
    return off, epoch


def _read_key(spec: RemoteReadSpec) -> tuple[int, bool]:
    """The offset of a read, and what another read there must ask the same to take it over
    (``AbandonedReads.adopt``)."""
    return spec.fetch_offset, spec.read_committed


def _labels(req: RemoteFetchRequest) -> tuple[str, str]:
    """The per-partition metric labels of a remote read."""
    return req.log.tp.topic, str(req.log.tp.partition)


def _has_records(read: asyncio.Future[RemoteFetchResult]) -> bool:
    """Whether a remote read that is done gave records (a failed one gave none)."""
    if read.cancelled() or read.exception() is not None:
        return False
    return bool(read.result().records)


def _set_soon(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
    """Complete ``future`` on its loop, from any thread (a chunk GET's end); nothing if the
    Fetch waiting for it has stopped, or the loop is closing."""

    def _set() -> None:
        if not future.done():
            future.set_result(None)

    try:
        loop.call_soon_threadsafe(_set)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass
