"""Replaying ``__remote_log_metadata`` record values into caches, outside the RLMM.

Tools that read the metadata topic as ordinary clients (``tierlog remote segments``, the
Spark driver's remote catalog) need the same state the broker's RLMM holds, not a second
interpretation of the events: they fold the records of a metadata partition, in offset
order, into the same ``RemoteLogMetadataCache``. The fold is a replay, so an update of a
segment added before the records read (or already gone) is dropped, as the RLMM does while
replaying; a partition-delete event leaves that partition with an empty cache.
"""

from __future__ import annotations

from collections.abc import Iterable

from tierlog.tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemoteResourceNotFoundException,
    TopicIdPartition,
)
from tierlog.tiered.metadata.cache import RemoteLogMetadataCache
from tierlog.tiered.metadata.serde import deserialize

__all__ = ["fold_metadata"]


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
