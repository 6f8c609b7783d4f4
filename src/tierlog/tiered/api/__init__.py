"""KIP-405 plugin surface: everything a storage or metadata plugin may rely on.

Depends on nothing else in tierlog. One concept per module; this package re-exports them.
"""

from tierlog.tiered.api.custom_metadata import CustomMetadata
from tierlog.tiered.api.exceptions import (
    CustomMetadataSizeLimitExceededException,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    ReplicaNotAvailableException,
    RetriableRemoteStorageException,
)
from tierlog.tiered.api.index_type import IndexType
from tierlog.tiered.api.inventory import (
    ObjectKind,
    SegmentObject,
    StoredObject,
    SupportsInventory,
)
from tierlog.tiered.api.log_segment_data import LogSegmentData
from tierlog.tiered.api.metadata_topic import SupportsMetadataTopic
from tierlog.tiered.api.metadata_topic_io import MetadataTopicIO
from tierlog.tiered.api.plugin import (
    RLMM_CLASS_KEY,
    RLMM_PROPS_PREFIX,
    RSM_ALIASES,
    RSM_CLASS_KEY,
    RSM_PROPS_PREFIX,
    PluginLoadError,
    load_plugin,
    load_remote_log_metadata_manager,
    load_remote_storage_manager,
    plugin_class,
    plugin_props,
)
from tierlog.tiered.api.read_ahead import SupportsReadAhead
from tierlog.tiered.api.read_view import SupportsReadView
from tierlog.tiered.api.remote_log_metadata_manager import RemoteLogMetadataManager
from tierlog.tiered.api.remote_log_segment_id import RemoteLogSegmentId
from tierlog.tiered.api.remote_log_segment_metadata import RemoteLogSegmentMetadata
from tierlog.tiered.api.remote_log_segment_metadata_update import (
    RemoteLogSegmentMetadataUpdate,
)
from tierlog.tiered.api.remote_log_segment_state import RemoteLogSegmentState
from tierlog.tiered.api.remote_partition_delete_metadata import RemotePartitionDeleteMetadata
from tierlog.tiered.api.remote_partition_delete_state import RemotePartitionDeleteState
from tierlog.tiered.api.remote_storage_manager import RemoteStorageManager
from tierlog.tiered.api.segment_manifests import ManifestContents, SupportsSegmentManifests
from tierlog.tiered.api.topic_id_partition import TopicIdPartition

__all__ = [
    "RLMM_CLASS_KEY",
    "RLMM_PROPS_PREFIX",
    "RSM_ALIASES",
    "RSM_CLASS_KEY",
    "RSM_PROPS_PREFIX",
    "CustomMetadata",
    "CustomMetadataSizeLimitExceededException",
    "IndexType",
    "LogSegmentData",
    "ManifestContents",
    "MetadataTopicIO",
    "ObjectKind",
    "PluginLoadError",
    "RemoteLogMetadataManager",
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataUpdate",
    "RemoteLogSegmentState",
    "RemotePartitionDeleteMetadata",
    "RemotePartitionDeleteState",
    "RemoteResourceNotFoundException",
    "RemoteStorageException",
    "RemoteStorageManager",
    "ReplicaNotAvailableException",
    "RetriableRemoteStorageException",
    "SegmentObject",
    "StoredObject",
    "SupportsInventory",
    "SupportsMetadataTopic",
    "SupportsReadAhead",
    "SupportsReadView",
    "SupportsSegmentManifests",
    "TopicIdPartition",
    "load_plugin",
    "load_remote_log_metadata_manager",
    "load_remote_storage_manager",
    "plugin_class",
    "plugin_props",
]
