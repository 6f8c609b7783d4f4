"""Metadata of the remote tier: the per-partition cache, the ``__remote_log_metadata``
record serde and partitioner, and the default topic-based RemoteLogMetadataManager.

Depends only on ``tierlog.tiered.api``; the metadata topic is reached through the abstract
``MetadataTopicIO`` so the broker can plug in its own log engine.
"""

from tierlog.tiered.metadata.cache import RemoteLogMetadataCache
from tierlog.tiered.metadata.partition_snapshot import EpochSnapshot, PartitionSnapshot

__all__ = ["EpochSnapshot", "PartitionSnapshot", "RemoteLogMetadataCache"]
