"""Metadata of the remote tier: the per-partition cache, the ``__remote_log_metadata``
record serde and partitioner, and the default topic-based RemoteLogMetadataManager.

Depends only on ``tierlog.tiered.api``; the metadata topic is reached through the abstract
``MetadataTopicIO`` so the broker can plug in its own log engine.
"""

from tierlog.tiered.metadata.cache import RemoteLogMetadataCache
from tierlog.tiered.metadata.memory_topic_io import InMemoryMetadataTopicIO
from tierlog.tiered.metadata.partition_snapshot import EpochSnapshot, PartitionSnapshot
from tierlog.tiered.metadata.partitioner import RemoteLogMetadataTopicPartitioner, murmur2
from tierlog.tiered.metadata.serde import MetadataSerdeError, deserialize, serialize
from tierlog.tiered.metadata.topic_based import (
    RemoteLogMetadataInitializationError,
    TopicBasedRemoteLogMetadataManager,
)
from tierlog.tiered.metadata.topic_based_config import TopicBasedRlmmConfig
from tierlog.tiered.metadata.topic_io import (
    METADATA_TOPIC,
    METADATA_TOPIC_CONFIGS,
    MetadataTopicIO,
)

#: Value for ``remote.log.metadata.manager.class.name`` (the broker's default alias target).
TOPIC_BASED_RLMM_CLASS = "tierlog.tiered.metadata.topic_based:TopicBasedRemoteLogMetadataManager"

#: Aliases the broker passes to ``load_remote_log_metadata_manager``. Kafka's class name is the
#: config default, so it must resolve to ours.
RLMM_ALIASES = {
    "topic": TOPIC_BASED_RLMM_CLASS,
    "TopicBasedRemoteLogMetadataManager": TOPIC_BASED_RLMM_CLASS,
    "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager": (
        TOPIC_BASED_RLMM_CLASS
    ),
}

__all__ = [
    "METADATA_TOPIC",
    "METADATA_TOPIC_CONFIGS",
    "RLMM_ALIASES",
    "TOPIC_BASED_RLMM_CLASS",
    "EpochSnapshot",
    "InMemoryMetadataTopicIO",
    "MetadataSerdeError",
    "MetadataTopicIO",
    "PartitionSnapshot",
    "RemoteLogMetadataCache",
    "RemoteLogMetadataInitializationError",
    "RemoteLogMetadataTopicPartitioner",
    "TopicBasedRemoteLogMetadataManager",
    "TopicBasedRlmmConfig",
    "deserialize",
    "murmur2",
    "serialize",
]
