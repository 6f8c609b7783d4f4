"""Topic-level keys (Kafka's ``TopicConfig``) and the broker keys that supply their defaults.

The ``synonyms`` of a topic key are Kafka's ``ServerTopicConfigSynonyms``: the broker keys
consulted, in order, when the topic has no override. DescribeConfigs uses them to report
where a value comes from.
"""

from __future__ import annotations

import re
from typing import Any

from tierlog.config.definitions import (
    BOOL,
    DBL,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    STR,
    ConfigKey,
    KeyRegistry,
    at_least,
    between,
    each_of,
    one_of,
)
from tierlog.config.kafka_versions import DEFAULT_MESSAGE_FORMAT_VERSION, kafka_version_problem

TOPIC_KEYS = KeyRegistry()
K = ConfigKey


def throttled_replicas_problem(value: Any) -> str | None:
    """Kafka's rule for ``*.replication.throttled.replicas``: empty, ``*`` alone, or
    ``partitionId:brokerId`` entries."""
    items = [str(v).strip() for v in value]
    if items == ["*"] or all(re.fullmatch(r"[0-9]+:[0-9]+", item) for item in items):
        return None
    return "must be '*' or a comma-separated list of partitionId:brokerId entries"


TOPIC_KEYS.add(
    K(
        "cleanup.policy",
        LIST,
        ["delete"],
        "delete, compact (keep the latest record per key) or both.",
        each_of("delete", "compact"),
        synonyms=("log.cleanup.policy",),
    ),
    K(
        "compression.type",
        STR,
        "producer",
        "Final compression; only 'producer' is honoured.",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        synonyms=("compression.type",),
    ),
    K(
        "segment.bytes",
        INT,
        1073741824,
        "Segment size before roll.",
        at_least(14),
        synonyms=("log.segment.bytes",),
    ),
    K(
        "segment.ms",
        LONG,
        604800000,
        "Segment age before roll.",
        at_least(1),
        synonyms=("log.roll.ms", "log.roll.hours"),
    ),
    K(
        "segment.jitter.ms",
        LONG,
        0,
        "Random jitter subtracted from segment.ms.",
        at_least(0),
        synonyms=("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ),
    K(
        "segment.index.bytes",
        INT,
        10485760,
        "Index size; a full index rolls the segment.",
        at_least(4),
        synonyms=("log.index.size.max.bytes",),
    ),
    K(
        "index.interval.bytes",
        INT,
        4096,
        "Bytes between offset index entries.",
        at_least(0),
        synonyms=("log.index.interval.bytes",),
    ),
    K(
        "retention.ms",
        LONG,
        604800000,
        "Total retention time across tiers; -1 unlimited.",
        at_least(-1),
        synonyms=("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ),
    K(
        "retention.bytes",
        LONG,
        -1,
        "Total retention size across tiers; -1 unlimited.",
        synonyms=("log.retention.bytes",),
    ),
    K(
        "local.retention.ms",
        LONG,
        -2,
        "Local-tier retention time; -2 = retention.ms.",
        at_least(-2),
        synonyms=("log.local.retention.ms",),
    ),
    K(
        "local.retention.bytes",
        LONG,
        -2,
        "Local-tier retention size; -2 = retention.bytes.",
        at_least(-2),
        synonyms=("log.local.retention.bytes",),
    ),
    K(
        "max.message.bytes",
        INT,
        1048588,
        "Largest record batch accepted.",
        at_least(0),
        synonyms=("message.max.bytes",),
    ),
    K(
        "message.timestamp.type",
        STR,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of("CreateTime", "LogAppendTime"),
        synonyms=("log.message.timestamp.type",),
    ),
    K(
        "message.timestamp.before.max.ms",
        LONG,
        LONG_MAX,
        "Max age of a CreateTime timestamp.",
        at_least(0),
        synonyms=("log.message.timestamp.before.max.ms",),
    ),
    K(
        "message.timestamp.after.max.ms",
        LONG,
        LONG_MAX,
        "Max lead of a CreateTime timestamp.",
        at_least(0),
        synonyms=("log.message.timestamp.after.max.ms",),
    ),
    K(
        "message.downconversion.enable",
        BOOL,
        True,
        "Down-conversion for fetchers older than record format v2; tierlog serves v2 only.",
        synonyms=("log.message.downconversion.enable",),
        no_effect=True,
    ),
    K(
        "message.format.version",
        STR,
        DEFAULT_MESSAGE_FORMAT_VERSION,
        "A Kafka version; deprecated in Kafka 3.0 and ignored from inter-broker protocol 3.0 "
        "on. tierlog always writes record format v2.",
        kafka_version_problem,
        synonyms=("log.message.format.version",),
        no_effect=True,
    ),
    K(
        "message.timestamp.difference.max.ms",
        LONG,
        LONG_MAX,
        "Deprecated by KIP-937: the before and after bounds of a CreateTime timestamp that "
        "message.timestamp.before.max.ms / .after.max.ms leave at their default.",
        at_least(0),
        synonyms=("log.message.timestamp.difference.max.ms",),
    ),
    K(
        "min.insync.replicas",
        INT,
        1,
        "Min ISR for acks=all.",
        at_least(1),
        synonyms=("min.insync.replicas",),
    ),
    K(
        "file.delete.delay.ms",
        LONG,
        60000,
        "Delay before deleted segment files are removed.",
        at_least(0),
        synonyms=("log.segment.delete.delay.ms",),
    ),
    K(
        "flush.messages",
        LONG,
        LONG_MAX,
        "Messages between fsyncs.",
        at_least(1),
        synonyms=("log.flush.interval.messages",),
    ),
    K(
        "flush.ms",
        LONG,
        LONG_MAX,
        "Time between fsyncs.",
        at_least(0),
        synonyms=("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ),
    K("preallocate", BOOL, False, "Preallocate segments.", synonyms=("log.preallocate",)),
    K(
        "unclean.leader.election.enable",
        BOOL,
        False,
        "Cluster mode: with no in-sync replica left, elect an out-of-sync one (losing what "
        "it lacks). No effect on a single node.",
        synonyms=("unclean.leader.election.enable",),
    ),
    K(
        "leader.replication.throttled.replicas",
        LIST,
        [],
        "Cluster mode: partitionId:brokerId replicas (or * for all) whose leader side is "
        "throttled to the leader broker's leader.replication.throttled.rate while a follower "
        "outside the ISR fetches from it (replica moves and catch-up).",
        throttled_replicas_problem,
    ),
    K(
        "follower.replication.throttled.replicas",
        LIST,
        [],
        "Cluster mode: partitionId:brokerId replicas (or * for all) whose follower side is "
        "throttled to the follower broker's follower.replication.throttled.rate while it is "
        "not in sync.",
        throttled_replicas_problem,
    ),
    K(
        "delete.retention.ms",
        LONG,
        86400000,
        "How long tombstones stay after the cleaning that reached them.",
        at_least(0),
        synonyms=("log.cleaner.delete.retention.ms",),
    ),
    K(
        "min.compaction.lag.ms",
        LONG,
        0,
        "Records newer than this are never compacted.",
        at_least(0),
        synonyms=("log.cleaner.min.compaction.lag.ms",),
    ),
    K(
        "max.compaction.lag.ms",
        LONG,
        LONG_MAX,
        "A dirty record older than this makes the log cleanable whatever its dirty ratio.",
        at_least(1),
        synonyms=("log.cleaner.max.compaction.lag.ms",),
    ),
    K(
        "min.cleanable.dirty.ratio",
        DBL,
        0.5,
        "Dirty bytes over all bytes above which the log is cleaned.",
        between(0, 1),
        synonyms=("log.cleaner.min.cleanable.ratio",),
    ),
    K("remote.storage.enable", BOOL, False, "Tier this topic (needs the broker switch on)."),
    K(
        "remote.log.copy.disable",
        BOOL,
        False,
        "Stop uploads; remote reads and expiration continue (KIP-950).",
    ),
    K(
        "remote.log.delete.on.disable",
        BOOL,
        False,
        "Must be true to turn remote.storage.enable off; deletes remote data (KIP-950).",
    ),
)
del K
