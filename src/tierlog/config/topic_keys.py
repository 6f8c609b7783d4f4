"""Topic-level keys (Kafka's ``TopicConfig``) and the broker keys that supply their defaults.

The ``synonyms`` of a topic key are Kafka's ``ServerTopicConfigSynonyms``: the broker keys
consulted, in order, when the topic has no override. DescribeConfigs uses them to report
where a value comes from.
"""

from __future__ import annotations

from tierlog.config.definitions import (
    LONG_MAX,
    ConfigKey,
    ConfigType,
    KeyRegistry,
    at_least,
    between,
    each_of,
    one_of,
)

BOOL, STR, INT, LONG, DBL, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

TOPIC_KEYS = KeyRegistry()
K = ConfigKey

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
        "Unused on a single node.",
        synonyms=("unclean.leader.election.enable",),
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
