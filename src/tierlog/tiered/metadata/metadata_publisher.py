"""The publisher part of the topic-based RLMM: the one thread that appends mutations.

The publisher thread (``tierlog-rlmm-publisher``) takes mutations from the
``MutationQueue`` and appends them to the metadata partition of their user partition. It
defers to the consumer: nothing is appended before the topic is initialized, and a
mutation of a user partition whose assignment is pending or whose replay is not done waits
(``MetadataConsumer.may_publish``). An update of a segment the partition's cache does not
know fails without being appended.

After the append, the mutation stays in flight until the consumer applies it; a mutation
that no cache here will apply (the partition is not assigned here) completes once durable.
"""

from __future__ import annotations

import threading
import time

from tierlog.tiered.api import (
    RemoteLogSegmentMetadataUpdate,
    RemoteResourceNotFoundException,
    RemoteStorageException,
)
from tierlog.tiered.metadata.metadata_consumer import MetadataConsumer
from tierlog.tiered.metadata.mutation_queue import Mutation, MutationQueue, fail, succeed
from tierlog.tiered.metadata.partitioner import RemoteLogMetadataTopicPartitioner
from tierlog.tiered.metadata.serde import serialize
from tierlog.tiered.metadata.topic_based_config import TopicBasedRlmmConfig

__all__ = ["MetadataPublisher"]


class MetadataPublisher:
    def __init__(
        self, cond: threading.Condition, mutations: MutationQueue, consumer: MetadataConsumer
    ) -> None:
        self._cond = cond
        self._mutations = mutations
        self._consumer = consumer
        self._config = TopicBasedRlmmConfig()
        self._partitioner = RemoteLogMetadataTopicPartitioner(self._config.num_partitions)

    def start(self, config: TopicBasedRlmmConfig) -> threading.Thread:
        self._config = config
        self._partitioner = RemoteLogMetadataTopicPartitioner(config.num_partitions)
        thread = threading.Thread(target=self._main, name="tierlog-rlmm-publisher", daemon=True)
        thread.start()
        return thread

    def _main(self) -> None:
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
                    self._mutations.forget(m)
                    self._cond.notify_all()
                fail([m], err)

    def _next_mutation(self) -> Mutation | None:
        """Called with the lock held; blocks until a mutation may be published, None once
        the manager stopped serving."""
        while True:
            if self._consumer.unusable_error() is not None:
                return None
            now = time.monotonic()
            if self._mutations.expire(now, self._config.consume_wait_ms):
                self._cond.notify_all()
            if self._consumer.initialized.is_set():
                m = self._mutations.take(self._consumer.may_publish)
                if m is None:
                    self._cond.wait(self._mutations.next_wait(now))
                elif m.future.set_running_or_notify_cancel():
                    self._mutations.start(m)
                    return m
                continue  # cancelled by the caller: look again
            self._cond.wait(self._mutations.next_wait(now))

    def _publish(self, m: Mutation) -> None:
        if isinstance(m.record, RemoteLogSegmentMetadataUpdate) and self._consumer.lacks_segment(
            m.tip, m.record.remote_log_segment_id
        ):
            raise RemoteResourceNotFoundException(
                f"no remote log segment metadata found for {m.record.remote_log_segment_id}"
            )
        mp = self._partitioner.metadata_partition(m.tip)
        offset = self._consumer.topic.append(mp, None, serialize(m.record))
        done = False
        with self._cond:
            m.offset = offset
            if self._consumer.will_not_apply(m.tip, offset):
                self._mutations.finish(m.tip)
                done = True
            self._consumer.wake()
            self._cond.notify_all()
        if done:
            succeed([m])
