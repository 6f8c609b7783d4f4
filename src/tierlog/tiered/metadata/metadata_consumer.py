"""The consumer part of the topic-based RLMM: the one thread that changes its state.

The consumer thread (``tierlog-rlmm-consumer``) first creates or checks the topic, retried
until ``remote.log.metadata.initialization.retry.max.timeout.ms``; after that, or on a
partition-count mismatch, initialization fails for good and no partition becomes ready.

Then it serves assignment requests and replays. On assignment it loads the user
partition's entry from the metadata partition's snapshot file, if any, and replays the
metadata partition from the offset the snapshot covers (else from 0). Records of other user
partitions are skipped but the position still advances. A user partition is ready once
the replay reaches the end offset captured at assignment time (at once if the partition is
empty). Every ``snapshot.interval.records`` records (or ``snapshot.interval.ms``) and on
close it rewrites the snapshot file atomically.

Applying an event completes the in-flight mutation that published it (read-your-writes).
An unreadable record or any other failure of the loop stops serving for good: every
mutation fails, queries raise.

The consumer owns the per-partition caches; the manager's queries read them from the
caller's thread. All state is read and written under the manager's one lock, which every
part shares.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Set
from dataclasses import dataclass, replace

from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    TopicIdPartition,
)
from tierlog.tiered.metadata.cache import RemoteLogMetadataCache
from tierlog.tiered.metadata.mutation_queue import Mutation, MutationQueue, fail, succeed
from tierlog.tiered.metadata.partition_snapshot import PartitionSnapshot
from tierlog.tiered.metadata.partitioner import RemoteLogMetadataTopicPartitioner
from tierlog.tiered.metadata.serde import MetadataRecord, MetadataSerdeError, deserialize
from tierlog.tiered.metadata.snapshot_file import read_snapshot, write_snapshot
from tierlog.tiered.metadata.topic_based_config import (
    INIT_RETRY_MAX_TIMEOUT_MS,
    NUM_PARTITIONS,
    TopicBasedRlmmConfig,
)
from tierlog.tiered.metadata.topic_io import METADATA_TOPIC, METADATA_TOPIC_CONFIGS, MetadataTopicIO

__all__ = ["MetadataConsumer", "RemoteLogMetadataInitializationError"]

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


class MetadataConsumer:
    def __init__(
        self, cond: threading.Condition, mutations: MutationQueue, topic_io: MetadataTopicIO | None
    ) -> None:
        self._cond = cond
        self._mutations = mutations
        self._io = topic_io
        self._config = TopicBasedRlmmConfig()
        self._partitioner = RemoteLogMetadataTopicPartitioner(self._config.num_partitions)
        self._thread: threading.Thread | None = None
        self._closed = False
        self.initialized = threading.Event()
        self.init_error: RemoteLogMetadataInitializationError | None = None
        self.fatal: RemoteStorageException | None = None
        self._wake = False
        # Written by the consumer thread; other threads read them under the lock.
        self._assigned: dict[TopicIdPartition, _UserPartition] = {}
        self.caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        self.delete_states: dict[TopicIdPartition, RemotePartitionDeleteMetadata] = {}
        self._on_disk: dict[int, dict[TopicIdPartition, PartitionSnapshot]] = {}
        self._since_snapshot: dict[int, int] = {}
        self._last_snapshot: dict[int, float] = {}
        # Requests from callers to the consumer thread.
        self._requests: deque[tuple[bool, frozenset[TopicIdPartition]]] = deque()
        self._requested: set[TopicIdPartition] = set()
        self.snapshots_written = 0

    # -- lifecycle (caller threads) -------------------------------------------------------

    def start(self, config: TopicBasedRlmmConfig) -> threading.Thread:
        self._config = config
        self._partitioner = RemoteLogMetadataTopicPartitioner(config.num_partitions)
        self._thread = threading.Thread(
            target=self._main, name="tierlog-rlmm-consumer", daemon=True
        )
        self._thread.start()
        return self._thread

    def bind(self, topic_io: MetadataTopicIO) -> None:
        with self._cond:
            self._io = topic_io
            self._cond.notify_all()

    def close(self) -> bool:
        """Stop serving; False if it was already closed. Called with the lock held."""
        if self._closed:
            return False
        self._closed = True
        self._cond.notify_all()
        return True

    def write_final_snapshots(self) -> None:
        """After the thread has ended: the snapshots a clean close leaves behind."""
        if self.initialized.is_set() and self.fatal is None:
            for mp in list(self._since_snapshot):
                self._maybe_snapshot(mp, force=True)

    def unusable_error(self) -> RemoteStorageException | None:
        """Why nothing can be published or read now; None while serving. Lock held."""
        if self._closed:
            return RemoteStorageException("remote log metadata manager is closed")
        return self.init_error or self.fatal

    @property
    def topic(self) -> MetadataTopicIO:
        assert self._io is not None
        return self._io

    # -- assignment requests (caller threads) ---------------------------------------------

    def request_assignment(self, tips: frozenset[TopicIdPartition]) -> None:
        with self._cond:
            # until the consumer thread has processed this, mutations of these partitions
            # wait (a stop of the same partition may still be queued before it)
            self._requested |= tips
            self._requests.append((True, tips))
            self._cond.notify_all()

    def request_stop(self, tips: Set[TopicIdPartition]) -> None:
        with self._cond:
            self._requested -= tips
            self._requests.append((False, frozenset(tips)))
            self._cond.notify_all()

    # -- what the publisher asks (lock held) ----------------------------------------------

    def may_publish(self, tip: TopicIdPartition) -> bool:
        """A mutation of ``tip`` may be appended: its assignment is processed and, if it is
        assigned here, its replay is done."""
        if tip in self._requested:
            return False
        up = self._assigned.get(tip)
        return up is None or up.ready

    def lacks_segment(self, tip: TopicIdPartition, sid: RemoteLogSegmentId) -> bool:
        """``tip`` is assigned here and its cache has no segment ``sid``."""
        cache = self.caches.get(tip)
        return tip in self._assigned and cache is not None and not cache.has_segment(sid)

    def will_not_apply(self, tip: TopicIdPartition, offset: int) -> bool:
        """No cache here will apply the record at ``offset``: ``tip`` is not assigned here,
        is deleted, or its replay is already past it."""
        up = self._assigned.get(tip)
        return up is None or up.deleted or up.position > offset

    def wake(self) -> None:
        """A record was appended: read again before waiting."""
        self._wake = True

    # -- the consumer thread --------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._initialize()
        except RemoteLogMetadataInitializationError as e:
            log.error("%s", e)
            with self._cond:
                self.init_error = e
                doomed = self._mutations.drain(in_flight=False)
                self._cond.notify_all()
            fail(doomed, e)
            return
        with self._cond:
            self.initialized.set()
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
            self.fatal = err
            doomed = self._mutations.drain(in_flight=True)
            self._cond.notify_all()
        fail(doomed, err)

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

    def _consume_loop(self) -> None:
        poll_s = self._config.poll_interval_ms / 1000
        while True:
            with self._cond:
                if self._closed:
                    return
                requests = list(self._requests)
                self._requests.clear()
                self._wake = False
            self._serve_requests(requests, poll_s)
            progress = False
            for mp in sorted({up.metadata_partition for up in self._assigned.values()}):
                progress |= self._consume_partition(mp)
            self._mark_ready()
            for mp in list(self._since_snapshot):
                self._maybe_snapshot(mp, force=False)
            with self._cond:
                if self._mutations.expire(time.monotonic(), self._config.consume_wait_ms):
                    self._cond.notify_all()
                if not progress and not self._wake and not self._requests and not self._closed:
                    self._cond.wait(poll_s)

    def _serve_requests(
        self, requests: list[tuple[bool, frozenset[TopicIdPartition]]], poll_s: float
    ) -> None:
        """Assign or stop, in request order; on a failure the rest go back to the front."""
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
                return

    def _assign(self, tips: frozenset[TopicIdPartition]) -> None:
        for tip in tips:
            if tip in self._assigned:
                with self._cond:
                    self._requested.discard(tip)
                    self._cond.notify_all()
                continue
            mp = self._partitioner.metadata_partition(tip)
            end = self.topic.end_offset(mp)
            cache, position, delete_state = self._restore(tip, mp, end)
            with self._cond:
                if delete_state is not None:
                    self.delete_states[tip] = delete_state
                self.caches[tip] = cache
                self._assigned[tip] = _UserPartition(mp, position, end)
                self._requested.discard(tip)
            self._since_snapshot.setdefault(mp, 0)
            self._last_snapshot.setdefault(mp, time.monotonic())
            log.info(
                "assigned %s: replaying %s-%d from %d to %d", tip, METADATA_TOPIC, mp, position, end
            )

    def _restore(
        self, tip: TopicIdPartition, mp: int, end: int
    ) -> tuple[RemoteLogMetadataCache, int, RemotePartitionDeleteMetadata | None]:
        """The partition's cache, replay position and delete state from the snapshot file
        of its metadata partition; an empty cache at 0 without a usable snapshot."""
        if mp not in self._on_disk:
            snap_dir = self._config.snapshot_dir
            self._on_disk[mp] = {} if snap_dir is None else read_snapshot(snap_dir, mp)
        cache = RemoteLogMetadataCache()
        snap = self._on_disk[mp].get(tip)
        if snap is None:
            return cache, 0, None
        if snap.covered_offset > end:
            log.warning(
                "snapshot of %s covers offset %d beyond the end %d of %s-%d; replaying",
                tip,
                snap.covered_offset,
                end,
                METADATA_TOPIC,
                mp,
            )
            return cache, 0, None
        cache.restore(snap)
        position = snap.covered_offset
        return cache, position, snap.delete_metadata if position else None

    def _stop(self, tips: frozenset[TopicIdPartition]) -> None:
        done: list[Mutation] = []
        with self._cond:
            for tip in tips:
                if tip in self._requested:
                    continue  # re-assigned after this stop was requested
                self._assigned.pop(tip, None)
                self.caches.pop(tip, None)
                self.delete_states.pop(tip, None)
                m = self._mutations.finish(tip)
                if m is not None and m.offset >= 0:
                    done.append(m)
            self._cond.notify_all()
        succeed(done)

    def _consume_partition(self, mp: int) -> bool:
        with self._cond:
            members = {t: up for t, up in self._assigned.items() if up.metadata_partition == mp}
        start = min(up.position for up in members.values())
        try:
            if start >= self.topic.end_offset(mp):
                return False
            records = self.topic.read(mp, start)
        except Exception as e:
            log.warning("reading %s-%d at %d failed, retrying: %r", METADATA_TOPIC, mp, start, e)
            return False
        if not records:
            return False
        for offset, value in records:
            record = deserialize(value)
            tip = record.topic_id_partition
            up = members.get(tip)
            if up is None or offset < up.position or up.deleted:
                continue
            self._apply(tip, up, record)
        nxt = records[-1][0] + 1
        with self._cond:
            for up in members.values():
                up.position = max(up.position, nxt)
            done = self._mutations.finish_consumed(members, lambda t: members[t].position)
            self._cond.notify_all()
        succeed(done)
        self._since_snapshot[mp] = self._since_snapshot.get(mp, 0) + len(records)
        return True

    def _apply(self, tip: TopicIdPartition, up: _UserPartition, record: MetadataRecord) -> None:
        cache = self.caches.get(tip)
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
            self._apply_partition_delete(tip, up, record)
        else:
            log.warning("ignoring unexpected %s record in %s", type(record).__name__, tip)

    def _apply_partition_delete(
        self, tip: TopicIdPartition, up: _UserPartition, record: RemotePartitionDeleteMetadata
    ) -> None:
        current = self.delete_states.get(tip)
        if not RemotePartitionDeleteState.is_valid_transition(
            None if current is None else current.state, record.state
        ):
            log.warning("dropping invalid partition delete event %s for %s", record, tip)
            return
        with self._cond:
            if record.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self.delete_states.pop(tip, None)
                self.caches.pop(tip, None)
                up.deleted = True
            else:
                self.delete_states[tip] = record

    def _mark_ready(self) -> None:
        with self._cond:
            for tip, up in self._assigned.items():
                if not up.ready and up.position >= up.target_end:
                    up.ready = True
                    cache = self.caches.get(tip)
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
        entries = self._snapshot_entries(mp)
        if entries is None:
            return
        try:
            write_snapshot(snap_dir, mp, list(entries.values()))
        except OSError as e:
            log.warning("writing metadata snapshot of %s-%d failed: %r", METADATA_TOPIC, mp, e)
            return
        self._on_disk[mp] = entries
        self._since_snapshot[mp] = 0
        self._last_snapshot[mp] = time.monotonic()
        self.snapshots_written += 1

    def _snapshot_entries(self, mp: int) -> dict[TopicIdPartition, PartitionSnapshot] | None:
        """What the snapshot file of ``mp`` holds now; None until every user partition
        assigned here in it is ready."""
        with self._cond:
            members = {t: up for t, up in self._assigned.items() if up.metadata_partition == mp}
            if not all(up.ready for up in members.values()):
                return None
            entries = dict(self._on_disk.get(mp, {}))
            for tip, up in members.items():
                cache = self.caches.get(tip)
                if up.deleted or cache is None:
                    entries.pop(tip, None)
                    continue
                snap = cache.to_snapshot(tip, up.position)
                entries[tip] = replace(snap, delete_metadata=self.delete_states.get(tip))
            return entries
