"""Replaying ``__remote_log_metadata`` record values into caches, outside the RLMM.

Tools that read the metadata topic as ordinary clients (``tierlog remote segments``, the
Spark driver's remote catalog and metadata jobs) need the same state the broker's RLMM
holds, not a second interpretation of the events: they fold the records of a metadata
partition, in offset order, into the same ``RemoteLogMetadataCache``. The fold is a replay,
so an update of a segment added before the records read (or already gone) is dropped, as
the RLMM does while replaying; a partition-delete event leaves that partition with an empty
cache.

A tool reads through its own client, wrapped as a ``MetadataLogReader``; the walk from the
log start to the end offset taken before reading is ``read_metadata_partition``, and
``fold_metadata_partitions`` reads only the metadata partitions the wanted user partitions
hash to (the broker's partitioner).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence

from tierlog.tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemoteResourceNotFoundException,
    TopicIdPartition,
)
from tierlog.tiered.metadata.cache import RemoteLogMetadataCache
from tierlog.tiered.metadata.partitioner import RemoteLogMetadataTopicPartitioner
from tierlog.tiered.metadata.serde import deserialize

__all__ = [
    "MetadataLogReader",
    "fold_metadata",
    "fold_metadata_partitions",
    "read_metadata_partition",
]


class MetadataLogReader(abc.ABC):
    """One client's read access to the partitions of ``__remote_log_metadata``."""

    @abc.abstractmethod
    def offsets(self, partition: int) -> tuple[int, int]:
        """The partition's log start offset and its end offset, both taken now."""

    @abc.abstractmethod
    def read(
        self, partition: int, offset: int, end: int
    ) -> tuple[Sequence[tuple[int, bytes | None]], int]:
        """Records of the whole batches read from ``offset`` on, as (offset, value), and the
        offset after the last of those batches; a batch at or past ``end`` may stop the read.
        Records outside ``[offset, end)`` may be included: the caller drops them. The offset
        returned is at or below ``offset`` when no whole batch could be read."""


def read_metadata_partition(reader: MetadataLogReader, partition: int) -> list[bytes]:
    """Every record value of one metadata partition, in offset order, from its log start to
    the end offset taken before reading."""
    cursor, end = reader.offsets(partition)
    values: list[bytes] = []
    while cursor < end:
        records, next_offset = reader.read(partition, cursor, end)
        values.extend(v for o, v in records if cursor <= o < end and v is not None)
        if next_offset <= cursor:
            break  # nothing readable below the end offset
        cursor = next_offset
    return values


def fold_metadata_partitions(
    reader: MetadataLogReader, metadata_partitions: int, wanted: Iterable[TopicIdPartition]
) -> dict[TopicIdPartition, RemoteLogMetadataCache]:
    """One cache per wanted user partition, reading each metadata partition they hash to
    once, in partition order."""
    partitioner = RemoteLogMetadataTopicPartitioner(metadata_partitions)
    by_mp: dict[int, list[TopicIdPartition]] = {}
    for tip in wanted:
        by_mp.setdefault(partitioner.metadata_partition(tip), []).append(tip)
    caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
    for mp, tips in sorted(by_mp.items()):
        caches.update(fold_metadata(read_metadata_partition(reader, mp), tips))
    return caches


def fold_metadata(
    values: Iterable[bytes], wanted: Iterable[TopicIdPartition] | None
) -> dict[TopicIdPartition, RemoteLogMetadataCache]:
    """One cache per wanted user partition from metadata record values in offset order.

    Records of other partitions (the metadata partition is shared) are skipped. With
    ``wanted=None`` every partition found gets a cache (the storage audit needs them all).
    """
    caches = {tip: RemoteLogMetadataCache() for tip in wanted or ()}
    for value in values:
        record = deserialize(value)
        if isinstance(record, RemoteLogSegmentMetadata):
            if wanted is None and record.topic_id_partition not in caches:
                caches[record.topic_id_partition] = RemoteLogMetadataCache()
            cache = caches.get(record.topic_id_partition)
            if cache is not None:
                cache.add_copy_in_progress_segment(record)
        elif isinstance(record, RemoteLogSegmentMetadataUpdate):
            cache = caches.get(record.remote_log_segment_id.topic_id_partition)
            if cache is not None:
                try:
                    cache.update_remote_log_segment_metadata(record)
                except RemoteResourceNotFoundException:
                    pass  # a replay may start after the segment was added
        elif (
            isinstance(record, RemotePartitionDeleteMetadata)
            and record.topic_id_partition in caches
        ):
            caches[record.topic_id_partition] = RemoteLogMetadataCache()
    return caches
