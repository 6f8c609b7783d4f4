"""``__remote_log_metadata``: its name and the configs the manager asks for. The topic is
reached through ``MetadataTopicIO``, declared in ``tierlog.tiered.api``."""

from __future__ import annotations

from collections.abc import Mapping

from tierlog.tiered.api.metadata_topic_io import MetadataTopicIO

__all__ = ["METADATA_TOPIC", "METADATA_TOPIC_CONFIGS", "MetadataTopicIO"]

METADATA_TOPIC = "__remote_log_metadata"

#: Topic configs the manager asks for: never compacted (every event matters, in order),
#: never expired (the topic is the source of truth), never itself tiered.
METADATA_TOPIC_CONFIGS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "remote.storage.enable": "false",
}
