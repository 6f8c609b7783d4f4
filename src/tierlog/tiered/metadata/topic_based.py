"""The default RemoteLogMetadataManager: events stored in ``__remote_log_metadata``.

Theory of operation:

* Every event (segment add/update, partition delete) of a user partition is appended to the
  metadata partition chosen by ``RemoteLogMetadataTopicPartitioner``, so all events of one
  user partition are totally ordered.
* The manager is made of two parts with a thread each, sharing one lock:
  ``MetadataConsumer`` (``tierlog-rlmm-consumer``) owns all state changes: initialization,
  assignment, replay, readiness and snapshots; ``MetadataPublisher``
  (``tierlog-rlmm-publisher``) appends mutations. Between the callers and the two threads,
  the ``MutationQueue`` holds the mutations not yet completed.
* A mutator's future completes only after the consumer applied the event
  (read-your-writes), or fails after ``remote.log.metadata.consume.wait.ms``. Mutations of
  partitions not assigned here complete once durable (no cache here to be consistent
  with).
* Queries read the per-partition ``RemoteLogMetadataCache`` directly from the caller's
  thread; they never block on I/O.

When initialization (creating or checking the topic) fails for good, ``await_initialized``
raises ``RemoteLogMetadataInitializationError`` (the broker exits on it), mutators fail with
it and no partition becomes ready.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Set
from concurrent.futures import Future
from dataclasses import replace

from tierlog.tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    ReplicaNotAvailableException,
    SupportsMetadataTopic,
    TopicIdPartition,
)
from tierlog.tiered.metadata.cache import RemoteLogMetadataCache
from tierlog.tiered.metadata.metadata_consumer import (
    MetadataConsumer,
    RemoteLogMetadataInitializationError,
)
from tierlog.tiered.metadata.metadata_publisher import MetadataPublisher
from tierlog.tiered.metadata.mutation_queue import Mutation, MutationQueue, fail
from tierlog.tiered.metadata.partition_snapshot import PartitionSnapshot
from tierlog.tiered.metadata.serde import MetadataRecord
from tierlog.tiered.metadata.topic_based_config import TopicBasedRlmmConfig
from tierlog.tiered.metadata.topic_io import MetadataTopicIO

__all__ = ["RemoteLogMetadataInitializationError", "TopicBasedRemoteLogMetadataManager"]


class TopicBasedRemoteLogMetadataManager(RemoteLogMetadataManager, SupportsMetadataTopic):
    """See the module docstring. The topic is reached through a ``MetadataTopicIO`` given to
    the constructor or later via ``bind_metadata_topic`` (the plugin loader constructs
    plugins without arguments)."""

    def __init__(self, topic_io: MetadataTopicIO | None = None) -> None:
        self._config = TopicBasedRlmmConfig()
        self._cond = threading.Condition()
        self._started = False
        self._mutations = MutationQueue()
        self._consumer = MetadataConsumer(self._cond, self._mutations, topic_io)
        self._publisher = MetadataPublisher(self._cond, self._mutations, self._consumer)
        self._threads: list[threading.Thread] = []

    @property
    def snapshots_written(self) -> int:
        return self._consumer.snapshots_written

    # -- lifecycle --------------------------------------------------------------------------

    def configure(self, props: Mapping[str, str]) -> None:
        self._config = TopicBasedRlmmConfig.from_props(props)
        self._start()

    def bind_metadata_topic(self, topic_io: MetadataTopicIO) -> None:
        """Give the manager its topic; initialization waits for this (within its timeout)."""
        self._consumer.bind(topic_io)

    def _start(self) -> None:
        with self._cond:
            if self._started:
                return
            self._started = True
        self._threads.append(self._consumer.start(self._config))
        self._threads.append(self._publisher.start(self._config))

    def await_initialized(self, timeout_s: float | None = None) -> None:
        """Block until the topic is usable; raise ``RemoteLogMetadataInitializationError`` if
        initialization failed for good, ``TimeoutError`` if ``timeout_s`` passed first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        consumer = self._consumer
        with self._cond:
            while not consumer.initialized.is_set() and consumer.init_error is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("remote log metadata manager is still initializing")
                self._cond.wait(remaining)
            if consumer.init_error is not None:
                raise consumer.init_error

    @property
    def initialization_error(self) -> RemoteLogMetadataInitializationError | None:
        return self._consumer.init_error

    def close(self) -> None:
        with self._cond:
            if not self._consumer.close():
                return
        for t in self._threads:
            t.join(timeout=30)
        self._consumer.write_final_snapshots()
        err = RemoteStorageException("remote log metadata manager is closed")
        with self._cond:
            doomed = self._mutations.drain(in_flight=True)
        fail(doomed, err)

    # -- assignment -------------------------------------------------------------------------

    def on_partition_leadership_changes(
        self,
        leader_partitions: Set[TopicIdPartition],
        follower_partitions: Set[TopicIdPartition],
    ) -> None:
        tips = frozenset(leader_partitions) | frozenset(follower_partitions)
        self._consumer.request_assignment(tips)

    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        self._consumer.request_stop(partitions)

    def is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        cache = self._consumer.caches.get(topic_id_partition)
        return cache is not None and cache.is_initialized() and self._consumer.fatal is None

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
            err = self._consumer.unusable_error()
            if err is not None:
                f.set_exception(err)
                return f
            self._mutations.add(Mutation(tip, record, f, deadline))
            self._cond.notify_all()
        return f

    # -- queries ----------------------------------------------------------------------------

    def _cache_for(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        fatal = self._consumer.fatal
        if fatal is not None:
            raise fatal
        cache = self._consumer.caches.get(tip)
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
        delete_state = self._consumer.delete_states.get(topic_id_partition)
        return replace(snap, delete_metadata=delete_state)
