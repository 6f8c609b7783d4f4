"""The default RemoteLogMetadataManager: events stored in ``__remote_log_metadata``.

Theory of operation:

* Every event (segment add/update, partition delete) of a user partition is appended to the
  metadata partition chosen by ``RemoteLogMetadataTopicPartitioner``, so all events of one
  user partition are totally ordered.
* One **consumer thread** (``tierlog-rlmm-consumer``) owns all state changes. On assignment
  (``on_partition_leadership_changes``) it loads the user partition's entry from the
  metadata partition's snapshot file, if any, and replays the metadata partition from the
  offset the snapshot covers (else from 0). Records of other user partitions are skipped but
  the position still advances. A user partition is ready once the replay reaches the end
  offset captured at assignment time (at once if the partition is empty). Every
  ``snapshot.interval.records`` records (or ``snapshot.interval.ms``) and on close it
  rewrites the snapshot file atomically.
* One **publisher thread** (``tierlog-rlmm-publisher``) appends mutations. A mutation of a
  user partition that is still replaying waits until it is ready; mutations of one user
  partition are appended one at a time, each only after the previous one was applied, so
  validation sees the cache as the event will find it. A mutator's future completes only
  after the consumer thread applied the event (read-your-writes), or fails after
  ``remote.log.metadata.consume.wait.ms``. Mutations of partitions not assigned here
  complete once durable (no cache here to be consistent with).
* Queries read the per-partition ``RemoteLogMetadataCache`` directly from the caller's
  thread; they never block on I/O.

Initialization (creating or checking the topic) happens on the consumer thread and is
retried until ``remote.log.metadata.initialization.retry.max.timeout.ms``; after that, or on
a partition-count mismatch, it fails for good: ``await_initialized`` raises
``RemoteLogMetadataInitializationError`` (the broker exits on it), mutators fail with it and
no partition becomes ready.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Set
from concurrent.futures import Future
from dataclasses import dataclass, replace

from tierlog.tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    ReplicaNotAvailableException,
    RetriableRemoteStorageException,
    SupportsMetadataTopic,
    TopicIdPartition,
)
from tierlog.tiered.metadata.cache import RemoteLogMetadataCache
from tierlog.tiered.metadata.partition_snapshot import PartitionSnapshot
from tierlog.tiered.metadata.partitioner import RemoteLogMetadataTopicPartitioner
from tierlog.tiered.metadata.serde import MetadataRecord, MetadataSerdeError, deserialize, serialize
from tierlog.tiered.metadata.snapshot_file import read_snapshot, write_snapshot
from tierlog.tiered.metadata.topic_based_config import (
    INIT_RETRY_MAX_TIMEOUT_MS,
    NUM_PARTITIONS,
    TopicBasedRlmmConfig,
)
from tierlog.tiered.metadata.topic_io import METADATA_TOPIC, METADATA_TOPIC_CONFIGS, MetadataTopicIO

log = logging.getLogger(__name__)


class RemoteLogMetadataInitializationError(RemoteStorageException):
    """``__remote_log_metadata`` could not be created or used; tiered partitions cannot be
    served correctly, so the broker must stop."""


@dataclass(slots=True)
class _UserPartition:
    metadata_partition: int
    position: int  # next metadata offset whose record this partition has not yet seen
    target_end: int  # metadata end offset captured at assignment
    ready: bool = False
    deleted: bool = False


@dataclass(slots=True)
class _Mutation:
    tip: TopicIdPartition
    record: MetadataRecord
    future: Future[None]
    deadline: float
    offset: int = -1  # set once appended


class TopicBasedRemoteLogMetadataManager(RemoteLogMetadataManager, SupportsMetadataTopic):
    """See the module docstring. The topic is reached through a ``MetadataTopicIO`` given to
    the constructor or later via ``bind_metadata_topic`` (the plugin loader constructs
    plugins without arguments)."""

    def __init__(self, topic_io: MetadataTopicIO | None = None) -> None:
        self._io = topic_io
        self._config = TopicBasedRlmmConfig()
        self._partitioner = RemoteLogMetadataTopicPartitioner(self._config.num_partitions)
        self._cond = threading.Condition()
        self._started = False
        self._closed = False
        self._initialized = threading.Event()
        self._init_error: RemoteLogMetadataInitializationError | None = None
        self._fatal: RemoteStorageException | None = None
        self._wake = False
        # Owned by the consumer thread; other threads read them under _cond.
        self._assigned: dict[TopicIdPartition, _UserPartition] = {}
        self._caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        self._delete_states: dict[TopicIdPartition, RemotePartitionDeleteMetadata] = {}
        self._on_disk: dict[int, dict[TopicIdPartition, PartitionSnapshot]] = {}
        self._since_snapshot: dict[int, int] = {}
        self._last_snapshot: dict[int, float] = {}
        # Requests from callers to the consumer thread.
        self._requests: deque[tuple[bool, frozenset[TopicIdPartition]]] = deque()
        self._requested: set[TopicIdPartition] = set()
        # Publisher state.
        self._pending: dict[TopicIdPartition, deque[_Mutation]] = {}
        self._inflight: dict[TopicIdPartition, _Mutation] = {}
        self._threads: list[threading.Thread] = []
        self.snapshots_written = 0

    # -- lifecycle --------------------------------------------------------------------------

    def configure(self, props: Mapping[str, str]) -> None:
        self._config = TopicBasedRlmmConfig.from_props(props)
        self._partitioner = RemoteLogMetadataTopicPartitioner(self._config.num_partitions)
        self._start()

    def bind_metadata_topic(self, topic_io: MetadataTopicIO) -> None:
        """Give the manager its topic; initialization waits for this (within its timeout)."""
        with self._cond:
            self._io = topic_io
            self._cond.notify_all()

    def _start(self) -> None:
        with self._cond:
            if self._started:
                return
            self._started = True
        for name, target in (
            ("tierlog-rlmm-consumer", self._consumer_main),
            ("tierlog-rlmm-publisher", self._publisher_main),
        ):
            t = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(t)
            t.start()

    def await_initialized(self, timeout_s: float | None = None) -> None:
        """Block until the topic is usable; raise ``RemoteLogMetadataInitializationError`` if
        initialization failed for good, ``TimeoutError`` if ``timeout_s`` passed first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while not self._initialized.is_set() and self._init_error is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("remote log metadata manager is still initializing")
                self._cond.wait(remaining)
            if self._init_error is not None:
                raise self._init_error

    @property
    def initialization_error(self) -> RemoteLogMetadataInitializationError | None:
        return self._init_error

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=30)
        if self._initialized.is_set() and self._fatal is None:
            for mp in list(self._since_snapshot):
                self._maybe_snapshot(mp, force=True)
        err = RemoteStorageException("remote log metadata manager is closed")
        with self._cond:
            doomed = [m for q in self._pending.values() for m in q]
            doomed += list(self._inflight.values())
            self._pending.clear()
            self._inflight.clear()
        _fail(doomed, err)

    # -- assignment -------------------------------------------------------------------------

    def on_partition_leadership_changes(
        self,
        leader_partitions: Set[TopicIdPartition],
        follower_partitions: Set[TopicIdPartition],
    ) -> None:
        tips = frozenset(leader_partitions) | frozenset(follower_partitions)
        with self._cond:
            # until the consumer thread has processed this, mutations of these partitions
            # wait (a stop of the same partition may still be queued before it)
            self._requested |= tips
            self._requests.append((True, tips))
            self._cond.notify_all()

    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        with self._cond:
            self._requested -= partitions
            self._requests.append((False, frozenset(partitions)))
            self._cond.notify_all()

    def is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        cache = self._caches.get(topic_id_partition)
        return cache is not None and cache.is_initialized() and self._fatal is None

    # -- mutators ---------------------------------------------------------------------------

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> Future[None]:
        if metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError(
                f"added segment metadata must be COPY_SEGMENT_STARTED, got {metadata.state.name}"
            )
        return self._submit(metadata.topic_id_partition, metadata)

    def update_remote_log_segment_metadata(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> Future[None]:
        if update.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError("an update cannot move a segment to COPY_SEGMENT_STARTED")
        return self._submit(update.topic_id_partition, update)

    def put_remote_partition_delete_metadata(
        self, metadata: RemotePartitionDeleteMetadata
    ) -> Future[None]:
        return self._submit(metadata.topic_id_partition, metadata)

    def _submit(self, tip: TopicIdPartition, record: MetadataRecord) -> Future[None]:
        f: Future[None] = Future()
        deadline = time.monotonic() + self._config.consume_wait_ms / 1000
        with self._cond:
            err = self._unusable_error()
            if err is not None:
                f.set_exception(err)
                return f
            self._pending.setdefault(tip, deque()).append(_Mutation(tip, record, f, deadline))
            self._cond.notify_all()
        return f

    def _unusable_error(self) -> RemoteStorageException | None:
        if self._closed:
            return RemoteStorageException("remote log metadata manager is closed")
        return self._init_error or self._fatal

    # -- queries ----------------------------------------------------------------------------

    def _cache_for(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        if self._fatal is not None:
            raise self._fatal
        cache = self._caches.get(tip)
        if cache is None:
            raise RemoteResourceNotFoundException(f"no remote log metadata for partition {tip}")
        if not cache.is_initialized():
            raise ReplicaNotAvailableException(
                f"remote log metadata of partition {tip} is still loading"
            )
        return cache

    def remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        return self._cache_for(topic_id_partition).remote_log_segment_metadata(epoch, offset)

    def highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, epoch: int
    ) -> int | None:
        return self._cache_for(topic_id_partition).highest_offset_for_epoch(epoch)

    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        cache = self._cache_for(topic_id_partition)
        if epoch is None:
            return iter(cache.list_all_remote_log_segments())
        return iter(cache.list_remote_log_segments(epoch))

    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        cache = self._cache_for(topic_id_partition)
        return sum(m.segment_size_in_bytes for m in cache.list_remote_log_segments(leader_epoch))

    def next_segment_with_txn_index(
        self, topic_id_partition: TopicIdPartition, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        return self._cache_for(topic_id_partition).next_segment_with_txn_index(epoch, offset)

    def partition_snapshot(self, topic_id_partition: TopicIdPartition) -> PartitionSnapshot:
        """The partition's full cache state (``covered_offset`` 0); for tests and tools that
        compare the state after different replays."""
        cache = self._cache_for(topic_id_partition)
        snap = cache.to_snapshot(topic_id_partition, 0)
        return replace(snap, delete_metadata=self._delete_states.get(topic_id_partition))

    # -- consumer thread --------------------------------------------------------------------

    def _consumer_main(self) -> None:
        try:
            self._initialize()
        except RemoteLogMetadataInitializationError as e:
            log.error("%s", e)
            with self._cond:
                self._init_error = e
                doomed = [m for q in self._pending.values() for m in q]
                self._pending.clear()
                self._cond.notify_all()
            _fail(doomed, e)
            return
        with self._cond:
            self._initialized.set()
            self._cond.notify_all()
        try:
            self._consume_loop()
        except MetadataSerdeError as e:
            self._die(RemoteStorageException(f"cannot read {METADATA_TOPIC}: {e}"))
        except Exception as e:
            log.exception("remote log metadata consumer failed")
            self._die(RemoteStorageException(f"remote log metadata consumer failed: {e!r}"))

    def _die(self, err: RemoteStorageException) -> None:
        log.error("%s; tiered partitions on this broker are no longer served", err)
        with self._cond:
            self._fatal = err
            doomed = [m for q in self._pending.values() for m in q]
            doomed += list(self._inflight.values())
            self._pending.clear()
            self._inflight.clear()
            self._cond.notify_all()
        _fail(doomed, err)

    def _initialize(self) -> None:
        cfg = self._config
        deadline = time.monotonic() + cfg.init_retry_max_timeout_ms / 1000
        configs = dict(METADATA_TOPIC_CONFIGS, **{"retention.ms": str(cfg.retention_ms)})
        last: BaseException | None = None
        while True:
            with self._cond:
                if self._closed:
                    raise RemoteLogMetadataInitializationError("closed during initialization")
                io = self._io
            if io is not None:
                try:
                    n = io.ensure_topic(cfg.num_partitions, configs)
                    break
                except Exception as e:
                    last = e
                    log.info("cannot create/read %s yet, retrying: %r", METADATA_TOPIC, e)
            if time.monotonic() >= deadline:
                cause = "no metadata topic access was provided" if io is None else repr(last)
                raise RemoteLogMetadataInitializationError(
                    f"could not create or read {METADATA_TOPIC} within "
                    f"{cfg.init_retry_max_timeout_ms} ms ({INIT_RETRY_MAX_TIMEOUT_MS}): {cause}"
                ) from last
            with self._cond:
                self._cond.wait(max(cfg.init_retry_interval_ms, 1) / 1000)
        if n != cfg.num_partitions:
            raise RemoteLogMetadataInitializationError(
                f"{METADATA_TOPIC} has {n} partitions but {NUM_PARTITIONS}="
                f"{cfg.num_partitions}; the count is fixed once the topic exists, "
                f"set {NUM_PARTITIONS}={n}"
            )

    @property
    def _topic(self) -> MetadataTopicIO:
        assert self._io is not None
        return self._io

    def _consume_loop(self) -> None:
        poll_s = self._config.poll_interval_ms / 1000
        while True:
            with self._cond:
                if self._closed:
                    return
                requests = list(self._requests)
                self._requests.clear()
                self._wake = False
            for i, (assign, tips) in enumerate(requests):
                try:
                    if assign:
                        self._assign(tips)
                    else:
                        self._stop(tips)
                except Exception as e:
                    log.warning("metadata partition assignment failed, retrying: %r", e)
                    with self._cond:
                        self._requests.extendleft(reversed(requests[i:]))
                        self._cond.wait(poll_s)
                    break
            progress = False
            for mp in sorted({up.metadata_partition for up in self._assigned.values()}):
                progress |= self._consume_partition(mp)
            self._mark_ready()
            for mp in list(self._since_snapshot):
                self._maybe_snapshot(mp, force=False)
            with self._cond:
                self._expire(time.monotonic())
                if not progress and not self._wake and not self._requests and not self._closed:
                    self._cond.wait(poll_s)

    def _assign(self, tips: frozenset[TopicIdPartition]) -> None:
        for tip in tips:
            if tip in self._assigned:
                with self._cond:
                    self._requested.discard(tip)
                    self._cond.notify_all()
                continue
            mp = self._partitioner.metadata_partition(tip)
            end = self._topic.end_offset(mp)
            if mp not in self._on_disk:
                snap_dir = self._config.snapshot_dir
                self._on_disk[mp] = {} if snap_dir is None else read_snapshot(snap_dir, mp)
            cache = RemoteLogMetadataCache()
            snap = self._on_disk[mp].get(tip)
            position = 0
            if snap is not None and snap.covered_offset > end:
                log.warning(
                    "snapshot of %s covers offset %d beyond the end %d of %s-%d; replaying",
                    tip,
                    snap.covered_offset,
                    end,
                    METADATA_TOPIC,
                    mp,
                )
            elif snap is not None:
                cache.restore(snap)
                position = snap.covered_offset
            with self._cond:
                if snap is not None and position and snap.delete_metadata is not None:
                    self._delete_states[tip] = snap.delete_metadata
                self._caches[tip] = cache
                self._assigned[tip] = _UserPartition(mp, position, end)
                self._requested.discard(tip)
            self._since_snapshot.setdefault(mp, 0)
            self._last_snapshot.setdefault(mp, time.monotonic())
            log.info(
                "assigned %s: replaying %s-%d from %d to %d", tip, METADATA_TOPIC, mp, position, end
            )

    def _stop(self, tips: frozenset[TopicIdPartition]) -> None:
        done: list[_Mutation] = []
        with self._cond:
            for tip in tips:
                if tip in self._requested:
                    continue  # re-assigned after this stop was requested
                self._assigned.pop(tip, None)
                self._caches.pop(tip, None)
                self._delete_states.pop(tip, None)
                m = self._inflight.pop(tip, None)
                if m is not None and m.offset >= 0:
                    done.append(m)
            self._cond.notify_all()
        _succeed(done)

    def _consume_partition(self, mp: int) -> bool:
        with self._cond:
            members = {t: up for t, up in self._assigned.items() if up.metadata_partition == mp}
        start = min(up.position for up in members.values())
        try:
            if start >= self._topic.end_offset(mp):
                return False
            records = self._topic.read(mp, start)
        except Exception as e:
            log.warning("reading %s-%d at %d failed, retrying: %r", METADATA_TOPIC, mp, start, e)
            return False
        if not records:
            return False
        for offset, value in records:
            record = deserialize(value)
            tip = _tip_of(record)
            up = members.get(tip)
            if up is None or offset < up.position or up.deleted:
                continue
            self._apply(tip, up, record)
        nxt = records[-1][0] + 1
        done: list[_Mutation] = []
        with self._cond:
            for tip, up in members.items():
                if up.position < nxt:
                    up.position = nxt
                m = self._inflight.get(tip)
                if m is not None and 0 <= m.offset < up.position:
                    done.append(self._inflight.pop(tip))
            self._cond.notify_all()
        _succeed(done)
        self._since_snapshot[mp] = self._since_snapshot.get(mp, 0) + len(records)
        return True

    def _apply(self, tip: TopicIdPartition, up: _UserPartition, record: MetadataRecord) -> None:
        cache = self._caches.get(tip)
        if cache is None:
            return
        if isinstance(record, RemoteLogSegmentMetadata):
            cache.add_copy_in_progress_segment(record)
        elif isinstance(record, RemoteLogSegmentMetadataUpdate):
            try:
                cache.update_remote_log_segment_metadata(record)
            except RemoteResourceNotFoundException as e:
                log.warning("dropping metadata update: %s", e)
        elif isinstance(record, RemotePartitionDeleteMetadata):
            current = self._delete_states.get(tip)
            if not RemotePartitionDeleteState.is_valid_transition(
                None if current is None else current.state, record.state
            ):
                log.warning("dropping invalid partition delete event %s for %s", record, tip)
                return
            with self._cond:
                if record.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                    self._delete_states.pop(tip, None)
                    self._caches.pop(tip, None)
                    up.deleted = True
                else:
                    self._delete_states[tip] = record
        else:
            log.warning("ignoring unexpected %s record in %s", type(record).__name__, tip)

    def _mark_ready(self) -> None:
        with self._cond:
            for tip, up in self._assigned.items():
                if not up.ready and up.position >= up.target_end:
                    up.ready = True
                    cache = self._caches.get(tip)
                    if cache is not None:
                        cache.mark_initialized()
                    log.info("remote log metadata of %s is ready", tip)
                    self._cond.notify_all()

    def _maybe_snapshot(self, mp: int, *, force: bool) -> None:
        snap_dir = self._config.snapshot_dir
        since = self._since_snapshot.get(mp, 0)
        if snap_dir is None or since == 0:
            return
        elapsed_ms = (time.monotonic() - self._last_snapshot.get(mp, 0.0)) * 1000
        due = (
            since >= self._config.snapshot_interval_records
            or elapsed_ms >= self._config.snapshot_interval_ms
        )
        if not (force or due):
            return
        with self._cond:
            members = {t: up for t, up in self._assigned.items() if up.metadata_partition == mp}
            if not all(up.ready for up in members.values()):
                return
            entries = dict(self._on_disk.get(mp, {}))
            for tip, up in members.items():
                cache = self._caches.get(tip)
                if up.deleted or cache is None:
                    entries.pop(tip, None)
                    continue
                snap = cache.to_snapshot(tip, up.position)
                entries[tip] = replace(snap, delete_metadata=self._delete_states.get(tip))
        try:
            write_snapshot(snap_dir, mp, list(entries.values()))
        except OSError as e:
            log.warning("writing metadata snapshot of %s-%d failed: %r", METADATA_TOPIC, mp, e)
            return
        self._on_disk[mp] = entries
        self._since_snapshot[mp] = 0
        self._last_snapshot[mp] = time.monotonic()
        self.snapshots_written += 1

    # -- publisher thread -------------------------------------------------------------------

    def _publisher_main(self) -> None:
        while True:
            with self._cond:
                m = self._next_mutation()
                if m is None:
                    return
            try:
                self._publish(m)
            except Exception as e:
                err = (
                    e
                    if isinstance(e, RemoteStorageException)
                    else RemoteStorageException(f"publishing remote log metadata failed: {e!r}")
                )
                with self._cond:
                    if self._inflight.get(m.tip) is m:
                        del self._inflight[m.tip]
                    self._cond.notify_all()
                _fail([m], err)

    def _next_mutation(self) -> _Mutation | None:
        """Called with the lock held; blocks until a mutation may be published."""
        while True:
            if self._closed or self._init_error is not None or self._fatal is not None:
                return None
            now = time.monotonic()
            self._expire(now)
            if self._initialized.is_set():
                for tip, queue in self._pending.items():
                    if queue and tip not in self._inflight and self._may_publish(tip):
                        m = queue.popleft()
                        if not queue:
                            del self._pending[tip]
                        if not m.future.set_running_or_notify_cancel():
                            break  # cancelled by the caller; look again
                        self._inflight[tip] = m
                        return m
                else:
                    self._cond.wait(self._next_wait(now))
                continue
            self._cond.wait(self._next_wait(now))

    def _may_publish(self, tip: TopicIdPartition) -> bool:
        if tip in self._requested:
            return False
        up = self._assigned.get(tip)
        return up is None or up.ready

    def _next_wait(self, now: float) -> float:
        deadlines = [q[0].deadline for q in self._pending.values() if q]
        deadlines += [m.deadline for m in self._inflight.values()]
        nearest = min(deadlines, default=now + 1.0)
        return min(max(nearest - now, 0.001), 1.0)

    def _publish(self, m: _Mutation) -> None:
        cache = self._caches.get(m.tip)
        up = self._assigned.get(m.tip)
        if (
            isinstance(m.record, RemoteLogSegmentMetadataUpdate)
            and up is not None
            and cache is not None
            and not cache.has_segment(m.record.remote_log_segment_id)
        ):
            raise RemoteResourceNotFoundException(
                f"no remote log segment metadata found for {m.record.remote_log_segment_id}"
            )
        mp = self._partitioner.metadata_partition(m.tip)
        offset = self._topic.append(mp, None, serialize(m.record))
        done = False
        with self._cond:
            m.offset = offset
            up = self._assigned.get(m.tip)
            if up is None or up.deleted or up.position > offset:
                self._inflight.pop(m.tip, None)
                done = True
            self._wake = True
            self._cond.notify_all()
        if done:
            _succeed([m])

    def _expire(self, now: float) -> None:
        """Called with the lock held: fail mutations whose wait ran out."""
        timeout_ms = self._config.consume_wait_ms
        expired: list[tuple[_Mutation, RemoteStorageException]] = []
        for tip, queue in list(self._pending.items()):
            while queue and queue[0].deadline <= now:
                expired.append(
                    (
                        queue.popleft(),
                        RetriableRemoteStorageException(
                            f"timed out after {timeout_ms} ms waiting for the remote log "
                            f"metadata of {tip} to load"
                        ),
                    )
                )
            if not queue:
                del self._pending[tip]
        for tip, m in list(self._inflight.items()):
            if m.offset >= 0 and m.deadline <= now:
                del self._inflight[tip]
                expired.append(
                    (
                        m,
                        RetriableRemoteStorageException(
                            f"timed out after {timeout_ms} ms waiting for own metadata event "
                            f"at offset {m.offset} of {tip} to be consumed"
                        ),
                    )
                )
        for m, err in expired:
            _fail([m], err)
        if expired:
            self._cond.notify_all()


def _tip_of(record: MetadataRecord) -> TopicIdPartition:
    return record.topic_id_partition


def _succeed(ms: list[_Mutation]) -> None:
    for m in ms:
        if not m.future.done():
            m.future.set_result(None)


def _fail(ms: list[_Mutation], err: BaseException) -> None:
    for m in ms:
        if not m.future.done():
            m.future.set_exception(err)
