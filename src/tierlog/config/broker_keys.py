"""Broker-level keys, with Kafka's names, defaults and validation.

Where tierlog's default differs from Kafka's, the doc string says so. Keys marked
``no_effect`` are accepted so that a Kafka ``server.properties`` can be reused unchanged;
they do nothing in a single-process broker.
"""

from __future__ import annotations

from typing import Any

from tierlog.config.connection_quotas import connection_overrides_problem
from tierlog.config.definitions import (
    BOOL,
    CLASS,
    DBL,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LONG_MAX,
    PASSWORD,
    SHORT,
    STR,
    ConfigKey,
    Dynamic,
    KeyRegistry,
    at_least,
    between,
    each_of,
    minus_one_or_at_least,
    no_java_class,
    no_java_class_but_jmx,
    non_empty,
    one_of,
)
from tierlog.config.kafka_versions import (
    DEFAULT_INTER_BROKER_PROTOCOL_VERSION,
    DEFAULT_MESSAGE_FORMAT_VERSION,
    kafka_version_problem,
)
from tierlog.config.zookeeper_connect import zookeeper_connect_problem

RSM_PREFIX_KEY = "remote.log.storage.manager.impl.prefix"
RLMM_PREFIX_KEY = "remote.log.metadata.manager.impl.prefix"


def _no_zookeeper_acls(value: Any) -> str | None:
    """ZooKeeper ACLs need an authenticated ZooKeeper session, which tierlog does not open:
    znodes it created would be left open while the operator believes them protected."""
    if value:
        return "tierlog does not authenticate to ZooKeeper, so it cannot set ACLs on znodes"
    return None


BROKER_KEYS = KeyRegistry()
K = ConfigKey
LIVE, AT_START = Dynamic.LIVE, Dynamic.AT_START

BROKER_KEYS.add(
    # --- identity and networking ---
    K("node.id", INT, 0, "Id of this broker. tierlog default 0 (Kafka requires it).", at_least(0)),
    K(
        "listeners",
        LIST,
        ["PLAINTEXT://127.0.0.1:9092"],
        "Listener URIs (only PLAINTEXT). Port 0 picks a free port.",
        dynamic=AT_START,
    ),
    K(
        "advertised.listeners",
        LIST,
        None,
        "Addresses given to clients in Metadata; defaults to listeners.",
        dynamic=AT_START,
    ),
    K(
        "socket.listen.backlog.size",
        INT,
        512,
        "Pending connections the listening socket queues (the kernel caps it at somaxconn). "
        "tierlog default 512 (Kafka: 50): one event loop both accepts and answers requests, "
        "so a burst of connects waits in this queue while it is busy.",
        at_least(1),
    ),
    K(
        "max.connections",
        INT,
        INT_MAX,
        "Most client connections open at once; a connection over it is closed as soon as it "
        "is accepted (Kafka stops accepting until one closes instead). Counted in "
        "tierlog_connections_refused_total.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "max.connections.per.ip",
        INT,
        INT_MAX,
        "Most connections open at once from one IP address (0 with overrides: only the "
        "overridden hosts may connect); a connection over it is closed as soon as it is "
        "accepted, as in Kafka. Counted in tierlog_connections_refused_total.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "max.connections.per.ip.overrides",
        STR,
        "",
        "host:count[,host:count...]: per-IP limits replacing max.connections.per.ip for these "
        "hosts (IP addresses, or names resolved when the broker starts).",
        connection_overrides_problem,
        dynamic=LIVE,
    ),
    K(
        "socket.request.max.bytes",
        INT,
        104857600,
        "Largest request frame accepted; a larger one closes that connection.",
        at_least(1),
    ),
    K(
        "connections.max.idle.ms",
        LONG,
        600000,
        "A client connection with no bytes read or written for this long is closed; one "
        "whose request is still being handled (a Fetch waiting for data) is not idle. -1 "
        "never closes (Kafka: any negative value; 0 and other negatives are refused here).",
        minus_one_or_at_least(1),
    ),
    K(
        "metrics.listener",
        STR,
        "http://127.0.0.1:9404",
        "tierlog: Prometheus HTTP endpoint (path /metrics). Empty disables it.",
    ),
    # --- log directories and segments ---
    K("log.dirs", LIST, None, "Data directories; overrides log.dir. Only the first is used."),
    K("log.dir", STR, "./data", "Data directory when log.dirs is unset (Kafka: /tmp/kafka-logs)."),
    K("num.partitions", INT, 1, "Partitions of auto-created topics.", at_least(1)),
    K(
        "default.replication.factor",
        INT,
        1,
        "Replication factor of auto-created topics (single node: must be 1).",
        at_least(1),
    ),
    K(
        "auto.create.topics.enable",
        BOOL,
        True,
        "Create unknown topics on Metadata/Produce (Kafka default true; tests turn it off).",
    ),
    K(
        "log.segment.bytes",
        INT,
        1073741824,
        "Segment size before roll. Minimum 14 as in Kafka 3.x (4.0 raised it to 1 MiB).",
        at_least(14),
        dynamic=LIVE,
    ),
    K(
        "log.roll.ms",
        LONG,
        None,
        "Segment age before roll; overrides log.roll.hours.",
        at_least(1),
        dynamic=LIVE,
    ),
    K("log.roll.hours", INT, 168, "Segment age before roll, in hours.", at_least(1)),
    K(
        "log.roll.jitter.ms",
        LONG,
        None,
        "Max jitter subtracted from segment.ms.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.roll.jitter.hours",
        INT,
        0,
        "Jitter in hours (when log.roll.jitter.ms unset).",
        at_least(0),
    ),
    K(
        "log.retention.ms",
        LONG,
        None,
        "Retention time; -1 = unlimited. Overrides minutes/hours.",
        minus_one_or_at_least(0),
        dynamic=LIVE,
    ),
    K("log.retention.minutes", INT, None, "Retention time in minutes (when ms unset)."),
    K("log.retention.hours", INT, 168, "Retention time in hours (when ms/minutes unset)."),
    K(
        "log.retention.bytes",
        LONG,
        -1,
        "Retention size per partition; -1 = unlimited.",
        dynamic=LIVE,
    ),
    K(
        "log.retention.check.interval.ms",
        LONG,
        300000,
        "How often retention (local and tier-aware) runs.",
        at_least(1),
    ),
    K(
        "log.index.size.max.bytes",
        INT,
        10485760,
        "Offset/time index size; a full index rolls the segment.",
        at_least(4),
        dynamic=LIVE,
    ),
    K(
        "log.index.interval.bytes",
        INT,
        4096,
        "Bytes between offset index entries.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.flush.interval.messages",
        LONG,
        LONG_MAX,
        "Messages accumulated before an fsync.",
        at_least(1),
        dynamic=LIVE,
    ),
    K(
        "log.flush.interval.ms",
        LONG,
        None,
        "Max time between fsyncs.",
        dynamic=LIVE,
    ),
    K(
        "log.flush.scheduler.interval.ms",
        LONG,
        LONG_MAX,
        "How often the flusher checks whether a log needs an fsync.",
    ),
    K(
        "log.flush.offset.checkpoint.interval.ms",
        INT,
        60000,
        "How often recovery-point checkpoints are written.",
        at_least(0),
    ),
    K(
        "log.flush.start.offset.checkpoint.interval.ms",
        INT,
        60000,
        "How often log-start-offset checkpoints are written.",
        at_least(0),
    ),
    K(
        "log.segment.delete.delay.ms",
        LONG,
        60000,
        "Delay before a deleted segment's files are removed.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.cleanup.policy",
        LIST,
        ["delete"],
        "Default cleanup policy: delete, compact or both.",
        each_of("delete", "compact"),
        dynamic=LIVE,
    ),
    K(
        "log.message.timestamp.type",
        STR,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of("CreateTime", "LogAppendTime"),
        dynamic=LIVE,
    ),
    K(
        "log.message.timestamp.before.max.ms",
        LONG,
        LONG_MAX,
        "Max age of a CreateTime timestamp relative to the broker clock.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.message.timestamp.after.max.ms",
        LONG,
        LONG_MAX,
        "Max lead of a CreateTime timestamp over the broker clock.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.message.timestamp.difference.max.ms",
        LONG,
        LONG_MAX,
        "Deprecated by KIP-937 (Kafka 3.6): the before and after bounds of a CreateTime "
        "timestamp that log.message.timestamp.before.max.ms / .after.max.ms leave at their "
        "default.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.preallocate",
        BOOL,
        False,
        "Preallocate segment files.",
        no_effect=True,
        dynamic=AT_START,
    ),
    K(
        "message.max.bytes",
        INT,
        1048588,
        "Largest record batch accepted.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "fetch.max.bytes",
        INT,
        57671680,
        "Most bytes one Fetch response carries, whatever the request asks for (Kafka: 55 MiB).",
        at_least(1024),
    ),
    K(
        "max.incremental.fetch.session.cache.slots",
        INT,
        1000,
        "Most incremental fetch sessions (KIP-227) the broker keeps; 0 answers every Fetch "
        "as a full one.",
        at_least(0),
    ),
    K(
        "compression.type",
        STR,
        "producer",
        "Topic compression default; only 'producer' (keep the producer's codec) is honoured.",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        dynamic=LIVE,
    ),
    K(
        "min.insync.replicas",
        INT,
        1,
        "Min ISR for acks=all (single node: 1).",
        at_least(1),
        dynamic=AT_START,
    ),
    K(
        "unclean.leader.election.enable",
        BOOL,
        False,
        "Cluster mode: with no in-sync replica left, elect an out-of-sync one (losing what "
        "it lacks). No effect on a single node.",
        dynamic=AT_START,
    ),
    # --- log cleaner (tierlog.log.cleaner) ---
    K("log.cleaner.enable", BOOL, True, "Run the log cleaner (compacted topics)."),
    K("log.cleaner.threads", INT, 1, "Log cleaner threads.", at_least(0), dynamic=LIVE),
    K(
        "log.cleaner.backoff.ms",
        LONG,
        15000,
        "Sleep of a cleaner thread that found no log to clean.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.cleaner.dedupe.buffer.size",
        LONG,
        134217728,
        "Offset-map memory of all cleaner threads together.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.cleaner.io.buffer.load.factor",
        DBL,
        0.9,
        "How full a cleaner's offset map may get before a pass ends.",
        between(0, 1),
        dynamic=LIVE,
    ),
    K(
        "log.cleaner.io.max.bytes.per.second",
        DBL,
        1.7976931348623157e308,
        "Read plus write rate of all cleaner threads together.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.cleaner.delete.retention.ms",
        LONG,
        86400000,
        "How long tombstones stay after the cleaning that reached them.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.cleaner.min.compaction.lag.ms",
        LONG,
        0,
        "Records newer than this are never compacted.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "log.cleaner.max.compaction.lag.ms",
        LONG,
        LONG_MAX,
        "A dirty record older than this makes its log cleanable whatever its dirty ratio.",
        at_least(1),
        dynamic=LIVE,
    ),
    K(
        "log.cleaner.min.cleanable.ratio",
        DBL,
        0.5,
        "Dirty bytes over all bytes above which a log is cleaned.",
        between(0, 1),
        dynamic=LIVE,
    ),
    # --- groups and offsets ---
    K(
        "offsets.topic.num.partitions",
        INT,
        50,
        "Partitions of __consumer_offsets.",
        at_least(1),
    ),
    K(
        "offsets.topic.replication.factor",
        SHORT,
        3,
        "Cluster mode: replicas of __consumer_offsets; until that many brokers are live it "
        "is not created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE.",
        at_least(1),
    ),
    K(
        "offsets.commit.timeout.ms",
        INT,
        5000,
        "Cluster mode: how long an offset commit or group write waits for the ISR.",
        at_least(1),
    ),
    K(
        "offsets.retention.minutes",
        INT,
        10080,
        "How long committed offsets of empty groups are kept.",
        at_least(1),
    ),
    K(
        "offsets.retention.check.interval.ms",
        LONG,
        600000,
        "How often offsets past offsets.retention.minutes are tombstoned.",
        at_least(1),
    ),
    K(
        "offsets.topic.segment.bytes",
        INT,
        104857600,
        "Segment size of __consumer_offsets (kept small so the cleaner reaches commits soon).",
        at_least(1),
    ),
    K(
        "offsets.topic.compression.codec",
        INT,
        0,
        "Codec of the batches the group coordinator writes: 0 none, 1 gzip, 2 snappy, 3 lz4, "
        "4 zstd.",
        between(0, 4),
    ),
    K(
        "offsets.load.buffer.size",
        INT,
        5242880,
        "Bytes read per chunk when loading __consumer_offsets at start-up.",
        at_least(1),
    ),
    K(
        "group.initial.rebalance.delay.ms",
        INT,
        3000,
        "Delay before the first rebalance of a new group.",
        at_least(0),
    ),
    K("group.min.session.timeout.ms", INT, 6000, "Minimum consumer session timeout."),
    K("group.max.session.timeout.ms", INT, 1800000, "Maximum consumer session timeout."),
    K(
        "group.max.size",
        INT,
        INT_MAX,
        "Most members of one classic group; a join beyond it gets GROUP_MAX_SIZE_REACHED.",
        at_least(1),
    ),
    K(
        "offset.metadata.max.bytes",
        INT,
        4096,
        "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE).",
    ),
    # --- transactions (the coordinator side) ---
    K(
        "transaction.max.timeout.ms",
        INT,
        900000,
        "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT).",
        at_least(1),
    ),
    K(
        "transactional.id.expiration.ms",
        INT,
        604800000,
        "Idle time after which a transactional id with no open transaction is forgotten.",
        at_least(1),
    ),
    K(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        INT,
        10000,
        "How often the coordinator aborts transactions older than their timeout.",
        at_least(1),
    ),
    K(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        INT,
        3600000,
        "How often the coordinator tombstones expired transactional ids.",
        at_least(1),
    ),
    K(
        "transaction.state.log.num.partitions",
        INT,
        50,
        "Partitions of __transaction_state; never change it once the topic exists.",
        at_least(1),
    ),
    K(
        "transaction.state.log.replication.factor",
        SHORT,
        3,
        "Replicas of __transaction_state (cluster mode; capped at the live brokers).",
        at_least(1),
    ),
    K(
        "transaction.state.log.min.isr",
        INT,
        2,
        "min.insync.replicas of __transaction_state (cluster mode).",
        at_least(1),
    ),
    K(
        "transaction.state.log.segment.bytes",
        INT,
        104857600,
        "Segment size of __transaction_state (compacted).",
        at_least(1),
    ),
    K(
        "transaction.partition.verification.enable",
        BOOL,
        True,
        "KIP-890: before a producer's first transactional write to a partition, its leader "
        "asks the coordinator whether the partition is in the transaction.",
    ),
    K(
        "transaction.state.log.load.buffer.size",
        INT,
        5242880,
        "Bytes read per chunk when a coordinator loads a __transaction_state partition.",
        at_least(1),
    ),
    K(
        "producer.id.expiration.ms",
        INT,
        86400000,
        "How long a producer id's state is kept after its last write, when it has no open "
        "transaction (KIP-854).",
        at_least(1),
        dynamic=AT_START,
    ),
    # --- accepted for compatibility with Kafka's sample server.properties ---
    K("process.roles", LIST, None, "KRaft roles.", no_effect=True),
    K("controller.quorum.voters", LIST, None, "KRaft voters.", no_effect=True),
    K("controller.quorum.bootstrap.servers", LIST, None, "KRaft bootstrap.", no_effect=True),
    K("controller.listener.names", LIST, None, "KRaft listener names.", no_effect=True),
    K("inter.broker.listener.name", STR, None, "Inter-broker listener.", no_effect=True),
    K(
        "listener.security.protocol.map",
        LIST,
        None,
        "Listener protocols.",
        no_effect=True,
        dynamic=AT_START,
    ),
    K(
        "num.network.threads",
        INT,
        3,
        "Network threads.",
        at_least(1),
        no_effect=True,
        dynamic=AT_START,
    ),
    K("num.io.threads", INT, 8, "Request threads.", at_least(1), no_effect=True, dynamic=AT_START),
    K("socket.send.buffer.bytes", INT, 102400, "SO_SNDBUF.", no_effect=True),
    K("socket.receive.buffer.bytes", INT, 102400, "SO_RCVBUF.", no_effect=True),
    K(
        "num.recovery.threads.per.data.dir",
        INT,
        2,
        "Recovery threads.",
        at_least(1),
        no_effect=True,
        dynamic=AT_START,
    ),
    K("share.coordinator.state.topic.replication.factor", SHORT, 3, "Share RF.", no_effect=True),
    K("share.coordinator.state.topic.min.isr", SHORT, 2, "Share ISR.", no_effect=True),
    K(
        "queued.max.requests",
        INT,
        500,
        "Requests queued for the request threads. tierlog reads at most 32 frames ahead "
        "per connection instead.",
        at_least(1),
        no_effect=True,
    ),
    K(
        "queued.max.request.bytes",
        LONG,
        -1,
        "Bytes of requests read but not yet handled, across all connections, before the "
        "broker stops reading requests until handlers have taken some (-1: no limit); when "
        "set, at least socket.request.max.bytes. The count is tierlog_queued_request_bytes.",
    ),
    K(
        "background.threads",
        INT,
        10,
        "Background task threads.",
        at_least(1),
        no_effect=True,
        dynamic=AT_START,
    ),
    K(
        "num.replica.alter.log.dirs.threads",
        INT,
        None,
        "Threads moving replicas between log dirs (tierlog uses one log dir).",
        no_effect=True,
    ),
    K("request.timeout.ms", INT, 30000, "Timeout of the broker's own requests.", no_effect=True),
    K(
        "controller.socket.timeout.ms",
        INT,
        30000,
        "Socket timeout of controller-to-broker channels (tierlog's controller writes to "
        "ZooKeeper only).",
        no_effect=True,
    ),
    K(
        "max.connection.creation.rate",
        INT,
        INT_MAX,
        "New connections per second the broker accepts, over the quota window "
        "(quota.window.*); a faster connection is held unread until its turn, as Kafka's "
        "acceptor blocks, then served; 0 refuses every new connection. Held time in "
        "tierlog_connection_accept_throttle_seconds_total.",
        at_least(0),
        dynamic=LIVE,
    ),
    K(
        "leader.replication.throttled.rate",
        LONG,
        LONG_MAX,
        "Bytes per second a leader sends for its throttled replicas "
        "(leader.replication.throttled.replicas) to followers outside the ISR. A dynamic "
        "broker config only, as in Kafka.",
        at_least(0),
        dynamic=LIVE,
        dynamic_only=True,
    ),
    K(
        "follower.replication.throttled.rate",
        LONG,
        LONG_MAX,
        "Bytes per second a follower not in sync fetches for its throttled replicas "
        "(follower.replication.throttled.replicas). A dynamic broker config only, as in Kafka.",
        at_least(0),
        dynamic=LIVE,
        dynamic_only=True,
    ),
    K(
        "replication.quota.window.num",
        INT,
        11,
        "Samples of the replication throttles' rate.",
        at_least(1),
    ),
    K(
        "replication.quota.window.size.seconds",
        INT,
        1,
        "Span of each sample of the replication throttles' rate.",
        at_least(1),
    ),
    K(
        "quota.window.num",
        INT,
        11,
        "Samples a client quota's rate is measured over (KIP-13).",
        at_least(1),
    ),
    K(
        "quota.window.size.seconds",
        INT,
        1,
        "Span of one client quota sample.",
        at_least(1),
    ),
    K(
        "controller.quota.window.num",
        INT,
        11,
        "With controller.quota.window.size.seconds, the burst of a controller_mutation_rate "
        "quota (KIP-599): its bucket holds num x size seconds of the rate.",
        at_least(1),
    ),
    K(
        "controller.quota.window.size.seconds",
        INT,
        1,
        "See controller.quota.window.num.",
        at_least(1),
    ),
    K(
        "replica.socket.timeout.ms",
        INT,
        30000,
        "How long a follower waits for its leader's answer (plus replica.fetch.wait.max.ms "
        "for a Fetch) before it drops the connection and tries again; at least "
        "replica.fetch.wait.max.ms.",
    ),
    K(
        "replica.socket.receive.buffer.bytes",
        INT,
        65536,
        "SO_RCVBUF of follower fetch connections.",
        no_effect=True,
    ),
    K(
        "replica.high.watermark.checkpoint.interval.ms",
        LONG,
        5000,
        "How often high watermarks are checkpointed; tierlog writes them with the other "
        "checkpoints (log.flush.offset.checkpoint.interval.ms).",
        no_effect=True,
    ),
    K(
        "producer.purgatory.purge.interval.requests",
        INT,
        1000,
        "Purge interval of the produce purgatory (tierlog removes completed waits at once).",
        no_effect=True,
    ),
    K(
        "fetch.purgatory.purge.interval.requests",
        INT,
        1000,
        "Purge interval of the fetch purgatory (tierlog removes completed waits at once).",
        no_effect=True,
    ),
    K(
        "delete.records.purgatory.purge.interval.requests",
        INT,
        1,
        "Purge interval of the delete-records purgatory.",
        no_effect=True,
    ),
    K(
        "broker.id.generation.enable",
        BOOL,
        True,
        "Generated broker ids (tierlog never generates one); when true, broker.id must not "
        "exceed reserved.broker.max.id, as in Kafka.",
    ),
    K(
        "reserved.broker.max.id",
        INT,
        1000,
        "Highest broker.id an operator may set while broker.id.generation.enable is true.",
        at_least(0),
    ),
    K(
        "inter.broker.protocol.version",
        STR,
        DEFAULT_INTER_BROKER_PROTOCOL_VERSION,
        "A Kafka version (3.7, 3.6-IV2, 2.8, ...). tierlog speaks every protocol version it "
        "implements, to clients and brokers alike; checked as Kafka checks it against "
        "log.message.format.version and offsets.topic.compression.codec.",
        kafka_version_problem,
        no_effect=True,
    ),
    K(
        "log.message.format.version",
        STR,
        DEFAULT_MESSAGE_FORMAT_VERSION,
        "A Kafka version; deprecated in Kafka 3.0. Below inter.broker.protocol.version 3.0 it "
        "may not name a newer record format than the protocol's, as in Kafka. tierlog always "
        "writes record format v2.",
        kafka_version_problem,
        no_effect=True,
    ),
    K(
        "log.message.downconversion.enable",
        BOOL,
        True,
        "Down-conversion for old fetchers; tierlog serves record format v2 only.",
        no_effect=True,
        dynamic=AT_START,
    ),
    K(
        "log.cleaner.io.buffer.size",
        INT,
        524288,
        "I/O buffer memory of the log cleaner threads.",
        at_least(0),
        no_effect=True,
        dynamic=AT_START,
    ),
    K(
        "log.dir.failure.timeout.ms",
        LONG,
        30000,
        "KRaft (Kafka 3.8+): how long a broker that cannot report a failed log dir keeps running.",
        at_least(1),
        no_effect=True,
    ),
    K(
        "zookeeper.set.acl",
        BOOL,
        False,
        "Create znodes with ACLs; only false: tierlog does not authenticate to ZooKeeper, "
        "which ACLs need.",
        _no_zookeeper_acls,
    ),
    K(
        "zookeeper.max.in.flight.requests",
        INT,
        10,
        "Unanswered ZooKeeper requests before the client blocks.",
        at_least(1),
        no_effect=True,
    ),
    K(
        "metric.reporters",
        LIST,
        [],
        "Java metrics reporter classes; only empty or Kafka's JmxReporter (accepted, no "
        "effect). tierlog exports its metrics to Prometheus (metrics.listener).",
        no_java_class_but_jmx,
        dynamic=AT_START,
    ),
    K(
        "metrics.num.samples",
        INT,
        2,
        "Samples kept to compute metrics.",
        at_least(1),
        no_effect=True,
    ),
    K(
        "metrics.sample.window.ms",
        LONG,
        30000,
        "Span of one metrics sample.",
        at_least(1),
        no_effect=True,
    ),
    K(
        "metrics.recording.level",
        STR,
        "INFO",
        "Highest recording level of metrics: INFO, DEBUG or TRACE.",
        one_of("INFO", "DEBUG", "TRACE", case_sensitive=False),
        no_effect=True,
    ),
    K(
        "auto.include.jmx.reporter",
        BOOL,
        True,
        "Deprecated in Kafka 3.4: add the JMX reporter (tierlog has no JMX).",
        no_effect=True,
    ),
    K(
        "kafka.metrics.reporters",
        LIST,
        [],
        "Java (Yammer) metrics reporter classes; only empty.",
        no_java_class,
    ),
    K(
        "kafka.metrics.polling.interval.secs",
        INT,
        10,
        "Polling interval of the Yammer metrics reporters.",
        at_least(1),
        no_effect=True,
    ),
    K(
        "create.topic.policy.class.name",
        CLASS,
        None,
        "Java CreateTopicPolicy class; only empty (a policy tierlog cannot run is refused, "
        "not ignored).",
        no_java_class,
    ),
    K(
        "alter.config.policy.class.name",
        CLASS,
        None,
        "Java AlterConfigPolicy class; only empty.",
        no_java_class,
    ),
    K(
        "client.quota.callback.class",
        CLASS,
        None,
        "Java ClientQuotaCallback class; only empty.",
        no_java_class,
    ),
    K(
        "replica.selector.class",
        STR,
        None,
        "Java ReplicaSelector class (KIP-392 fetch from follower); only empty.",
        no_java_class,
    ),
    K(
        "password.encoder.secret",
        PASSWORD,
        None,
        "Secret encoding dynamically configured passwords (tierlog has none).",
        no_effect=True,
    ),
    # --- tiered storage (spec/kafka-tiered-storage.md §6.1) ---
    K(
        "remote.log.storage.system.enable",
        BOOL,
        True,
        "Master switch for tiered storage. tierlog default true (Kafka: false); topics still "
        "opt in with remote.storage.enable=true.",
    ),
    K(
        "remote.log.storage.manager.class.name",
        STR,
        "objectstore",
        "RemoteStorageManager: an alias (objectstore, directory) or module:Class. tierlog "
        "default objectstore over file://<first log dir>-remote unless rsm.config.storage.url "
        "is set (directory: rsm.config.dir, same default root). Kafka: no default.",
        non_empty,
    ),
    K("remote.log.storage.manager.class.path", STR, None, "Unused (Java class path)."),
    K(
        "follower.fetch.last.tiered.offset.enable",
        BOOL,
        False,
        "KIP-1023: a follower with an empty log starts at the leader's last tiered offset + 1 "
        "(its state built from the remote tier) instead of the leader's earliest local offset.",
    ),
    K(
        "remote.log.metadata.manager.class.name",
        STR,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        "RemoteLogMetadataManager: an alias or module:Class.",
        non_empty,
    ),
    K("remote.log.metadata.manager.class.path", STR, None, "Unused (Java class path)."),
    K(
        RSM_PREFIX_KEY,
        STR,
        "rsm.config.",
        "Prefix of keys passed (stripped) to the RSM.",
        non_empty,
    ),
    K(
        RLMM_PREFIX_KEY,
        STR,
        "rlmm.config.",
        "Prefix of keys passed (stripped) to the RLMM.",
        non_empty,
    ),
    K(
        "remote.log.metadata.manager.listener.name",
        STR,
        None,
        "Listener the RLMM's clients use; must name an existing listener.",
        non_empty,
    ),
    K(
        "remote.log.metadata.custom.metadata.max.bytes",
        INT,
        128,
        "Max custom metadata per segment accepted from the RSM.",
        at_least(0),
    ),
    K(
        "remote.log.index.file.cache.total.size.bytes",
        LONG,
        1073741824,
        "Size bound of the remote index cache.",
        at_least(1),
        dynamic=AT_START,
    ),
    K(
        "remote.log.manager.thread.pool.size",
        INT,
        10,
        "Follower-task pool size and fallback for the two pools below.",
        at_least(1),
    ),
    K(
        "remote.log.manager.copier.thread.pool.size",
        INT,
        -1,
        "Copy pool size; -1 = remote.log.manager.thread.pool.size.",
        minus_one_or_at_least(1),
    ),
    K(
        "remote.log.manager.expiration.thread.pool.size",
        INT,
        -1,
        "Expiration pool size; -1 = remote.log.manager.thread.pool.size.",
        minus_one_or_at_least(1),
    ),
    K(
        "remote.log.manager.task.interval.ms",
        LONG,
        30000,
        "Delay between copy/expiration/follower task runs.",
        at_least(1),
    ),
    K("remote.log.manager.task.retry.backoff.ms", LONG, 500, "Copy retry back-off.", at_least(0)),
    K(
        "remote.log.manager.task.retry.backoff.max.ms",
        LONG,
        30000,
        "Max copy retry back-off.",
        at_least(0),
    ),
    K("remote.log.manager.task.retry.jitter", DBL, 0.2, "Back-off jitter.", between(0, 0.5)),
    K("remote.log.reader.threads", INT, 10, "Remote read pool size.", at_least(1)),
    K(
        "remote.log.reader.max.pending.tasks",
        INT,
        100,
        "Queue bound of the remote read pool.",
        at_least(1),
    ),
    K(
        "log.local.retention.ms",
        LONG,
        -2,
        "Default local.retention.ms; -2 = use log.retention.ms.",
        at_least(-2),
        dynamic=LIVE,
    ),
    K(
        "log.local.retention.bytes",
        LONG,
        -2,
        "Default local.retention.bytes; -2 = use log.retention.bytes.",
        at_least(-2),
        dynamic=LIVE,
    ),
    K(
        "remote.log.manager.copy.max.bytes.per.second",
        LONG,
        LONG_MAX,
        "Broker-wide upload rate quota.",
        at_least(1),
        dynamic=LIVE,
    ),
    K("remote.log.manager.copy.quota.window.num", INT, 11, "Copy quota samples.", at_least(1)),
    K(
        "remote.log.manager.copy.quota.window.size.seconds",
        INT,
        1,
        "Copy quota sample span.",
        at_least(1),
    ),
    K(
        "remote.log.manager.fetch.max.bytes.per.second",
        LONG,
        LONG_MAX,
        "Broker-wide remote read rate quota.",
        at_least(1),
        dynamic=LIVE,
    ),
    K("remote.log.manager.fetch.quota.window.num", INT, 11, "Fetch quota samples.", at_least(1)),
    K(
        "remote.log.manager.fetch.quota.window.size.seconds",
        INT,
        1,
        "Fetch quota sample span.",
        at_least(1),
    ),
    K("remote.fetch.max.wait.ms", INT, 500, "Timeout of a delayed remote fetch.", at_least(1)),
    K(
        "remote.fetch.partial.wait.ms",
        INT,
        20,
        "tierlog: once remote reads of a Fetch have records, how much longer it waits for its "
        "other remote reads; those still running are kept for the next Fetch at their offsets. "
        "At remote.fetch.max.wait.ms or more a Fetch waits for all of them, as Kafka's does.",
        at_least(0),
    ),
    K(
        "log.remote.copy.lag.ms",
        LONG,
        0,
        "KIP-1241: a sealed segment is uploaded once its newest record is this old (or "
        "log.remote.copy.lag.bytes follow it); 0 in either key uploads as soon as it is "
        "sealed, -1 disables this criterion.",
        at_least(-1),
    ),
    K(
        "log.remote.copy.lag.bytes",
        LONG,
        0,
        "KIP-1241: upload a sealed segment once this many bytes follow it (or it is "
        "log.remote.copy.lag.ms old); 0 uploads as soon as sealed, -1 disables this criterion.",
        at_least(-1),
    ),
    K(
        "remote.log.index.file.cache.ttl.ms",
        LONG,
        900000,
        "Kafka-internal key (KAFKA-19970): remote index cache entries unused this long are "
        "evicted; -1 disables time-based eviction.",
        at_least(-1),
    ),
    K(
        "remote.list.offsets.request.timeout.ms",
        LONG,
        30000,
        "Timeout of remote ListOffsets lookups.",
        at_least(1),
    ),
)

#: Cluster mode (ZooKeeper coordination and replication; spec/kafka-replication.md §6). Without
#: zookeeper.connect the broker is the single node of today and none of these keys matters.
#: They are read at start; ``num.replica.fetchers``, dynamic in Kafka, is refused by
#: AlterConfigs with a message saying so.
#: default.replication.factor, min.insync.replicas, unclean.leader.election.enable and
#: offsets.topic.replication.factor are defined above; the RLMM's
#: remote.log.metadata.topic.replication.factor is an RLMM key (under its prefix).
BROKER_KEYS.add(
    K(
        "zookeeper.connect",
        STR,
        None,
        "host:port[,host:port...][/chroot]; set, it turns cluster mode on. A missing chroot "
        "is created.",
        zookeeper_connect_problem,
    ),
    K(
        "zookeeper.session.timeout.ms",
        INT,
        18000,
        "ZooKeeper session timeout: how long a silent broker keeps its registration.",
        at_least(1),
    ),
    K(
        "zookeeper.connection.timeout.ms",
        INT,
        None,
        "Max wait for a ZooKeeper connection; unset = zookeeper.session.timeout.ms.",
        at_least(1),
    ),
    K(
        "broker.id",
        INT,
        -1,
        "Alias of node.id (ZooKeeper mode); -1 = use node.id. If both are set they must match.",
        minus_one_or_at_least(0),
    ),
    K("broker.rack", STR, None, "Rack of this broker, for rack-aware replica assignment."),
    K(
        "replica.lag.time.max.ms",
        LONG,
        30000,
        "A follower that has not caught up with the leader for this long leaves the ISR.",
        at_least(1),
    ),
    K(
        "replica.fetch.max.bytes",
        INT,
        1048576,
        "Bytes a follower asks for per partition (a larger first batch is still returned).",
        at_least(0),
    ),
    K(
        "replica.fetch.response.max.bytes",
        INT,
        10485760,
        "Bytes a follower asks for per fetch response.",
        at_least(0),
    ),
    K(
        "replica.fetch.wait.max.ms",
        INT,
        500,
        "Max wait of a follower fetch; at most replica.lag.time.max.ms.",
        at_least(0),
    ),
    K(
        "replica.fetch.min.bytes",
        INT,
        1,
        "Min bytes of a follower fetch response.",
        at_least(1),
    ),
    K(
        "replica.fetch.backoff.ms",
        INT,
        1000,
        "Back-off after a fetch error.",
        at_least(0),
    ),
    K(
        "num.replica.fetchers",
        INT,
        1,
        "Fetcher tasks per source broker (a partition's fetcher is chosen by a hash of it).",
        at_least(1),
        dynamic=AT_START,
    ),
    K(
        "controlled.shutdown.enable",
        BOOL,
        True,
        "On SIGTERM, move leadership off this broker before it stops.",
    ),
    K(
        "controlled.shutdown.max.retries",
        INT,
        3,
        "Controlled shutdown attempts before stopping anyway.",
        at_least(0),
    ),
    K(
        "controlled.shutdown.retry.backoff.ms",
        LONG,
        5000,
        "Back-off between controlled shutdown attempts.",
        at_least(0),
    ),
    K(
        "auto.leader.rebalance.enable",
        BOOL,
        True,
        "The controller moves leadership back to preferred replicas when imbalanced.",
    ),
    K(
        "leader.imbalance.check.interval.seconds",
        LONG,
        300,
        "How often the controller checks leader imbalance.",
        at_least(1),
    ),
    K(
        "leader.imbalance.per.broker.percentage",
        INT,
        10,
        "Share of a broker's preferred partitions led elsewhere that triggers a rebalance.",
        between(0, 100),
    ),
    K("delete.topic.enable", BOOL, True, "DeleteTopics is allowed (cluster mode)."),
)

#: TopicBasedRemoteLogMetadataManager keys (spec §6.3), given under the RLMM prefix.
RLMM_KEYS = KeyRegistry()
RLMM_KEYS.add(
    K(
        "remote.log.metadata.topic.num.partitions",
        INT,
        50,
        "Partitions of __remote_log_metadata.",
        at_least(1),
    ),
    K(
        "remote.log.metadata.topic.replication.factor",
        SHORT,
        3,
        "Its replication factor.",
        at_least(1),
    ),
    K("remote.log.metadata.topic.retention.ms", LONG, -1, "Its retention (-1 unlimited)."),
    K(
        "remote.log.metadata.consume.wait.ms",
        LONG,
        120000,
        "Wait for own event to be consumed.",
        at_least(0),
    ),
    K(
        "remote.log.metadata.initialization.retry.interval.ms",
        LONG,
        100,
        "Init retry interval.",
        at_least(0),
    ),
    K(
        "remote.log.metadata.initialization.retry.max.timeout.ms",
        LONG,
        120000,
        "Init retry limit.",
        at_least(0),
    ),
)
del K
