"""The metadata plugin interface: the strongly consistent record of what is in the tier."""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Set
from concurrent.futures import Future

from tierlog.tiered.api.remote_log_segment_metadata import RemoteLogSegmentMetadata
from tierlog.tiered.api.remote_log_segment_metadata_update import (
    RemoteLogSegmentMetadataUpdate,
)
from tierlog.tiered.api.remote_partition_delete_metadata import RemotePartitionDeleteMetadata
from tierlog.tiered.api.topic_id_partition import TopicIdPartition


class RemoteLogMetadataManager(abc.ABC):
    """Contract every metadata plugin must honour.

    Consistency: reads on this broker observe every mutation whose future has completed
    (read-your-writes). Events of one user partition are applied in the order they were
    published.

    Threading: every method may be called from any thread. Mutators return a
    ``concurrent.futures.Future`` so threads can block on ``result()`` and the asyncio loop
    can ``await asyncio.wrap_future(f)``; queries are synchronous and cheap (in-memory) but
    must not be called for a partition whose ``is_ready`` is false.

    Visibility of segment states to queries:

    ===============================  ========  ========  ==============  ===============
    query                            COPY_     COPY_     DELETE_STARTED  DELETE_FINISHED
                                     STARTED   FINISHED
    ===============================  ========  ========  ==============  ===============
    ``remote_log_segment_metadata``  no        yes       no              no
    ``list_remote_log_segments``     yes       yes       yes             no
    ===============================  ========  ========  ==============  ===============

    ``highest_offset_for_epoch`` counts only segments that reached COPY_FINISHED and never
    decreases when they are later deleted.

    Errors: queries for a partition the manager does not know raise
    ``RemoteResourceNotFoundException``; for a partition still loading,
    ``ReplicaNotAvailableException`` (retriable).

    Lifecycle: instantiated with no arguments, ``configure`` gets the ``rlmm.config.``
    properties (prefix stripped), then ``on_partition_leadership_changes`` tells it which
    partitions this broker serves; ``close`` at shutdown.
    """

    @abc.abstractmethod
    def configure(self, props: Mapping[str, str]) -> None:
        """Receive plugin settings before first use."""

    @abc.abstractmethod
    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> Future[None]:
        """Announce a copy that is about to start. ``metadata.state`` must be
        ``COPY_SEGMENT_STARTED`` (otherwise ``ValueError`` is raised at once). The future
        completes once the event is durable and visible to this broker's queries."""

    @abc.abstractmethod
    def update_remote_log_segment_metadata(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> Future[None]:
        """Publish a state change of a known segment. ``update.state`` must not be
        ``COPY_SEGMENT_STARTED``. An invalid transition is dropped by readers, not applied;
        an unknown segment fails the future with ``RemoteResourceNotFoundException``."""

    @abc.abstractmethod
    def put_remote_partition_delete_metadata(
        self, metadata: RemotePartitionDeleteMetadata
    ) -> Future[None]:
        """Publish a partition-delete state. After ``DELETE_PARTITION_FINISHED`` the
        partition's metadata is gone and queries raise ``RemoteResourceNotFoundException``."""

    @abc.abstractmethod
    def remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The ``COPY_SEGMENT_FINISHED`` segment holding ``offset`` written in leader
        ``epoch``, or None."""

    @abc.abstractmethod
    def highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, epoch: int
    ) -> int | None:
        """Highest offset of ``epoch`` ever copied successfully, or None. Never decreases,
        even when the segments holding it are deleted."""

    @abc.abstractmethod
    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        """Segments not yet ``DELETE_SEGMENT_FINISHED``. With ``epoch``: only segments
        containing that epoch, sorted by start offset. Without: all of them, in no
        particular order. The iterator works on a snapshot; mutations do not disturb it."""

    @abc.abstractmethod
    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        """Total ``segment_size_in_bytes`` of the listed segments containing
        ``leader_epoch`` (0 if none)."""

    def next_segment_with_txn_index(
        self, topic_id_partition: TopicIdPartition, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """First readable segment of ``epoch`` at or after ``offset`` that has a transaction
        index. The default (Kafka's) answers with the segment holding ``offset``;
        implementations with an index do better."""
        return self.remote_log_segment_metadata(topic_id_partition, epoch, offset)

    @abc.abstractmethod
    def on_partition_leadership_changes(
        self,
        leader_partitions: Set[TopicIdPartition],
        follower_partitions: Set[TopicIdPartition],
    ) -> None:
        """Start tracking these partitions (loading their metadata in the background)."""

    @abc.abstractmethod
    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        """Stop tracking these partitions and drop their in-memory state."""

    def is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        """True once the partition's metadata is fully loaded; the RemoteLogManager skips
        its tasks until then."""
        return True

    @abc.abstractmethod
    def close(self) -> None:
        """Stop background work; pending futures fail."""
