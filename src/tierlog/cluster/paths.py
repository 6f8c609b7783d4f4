"""Kafka's ZooKeeper layout (spec/kafka-replication.md §6.1), so that an operator's zkCli.sh
habits carry over. Every path is relative to the chroot of ``zookeeper.connect``.

Persistent roots that every broker creates at start (``PERSISTENT_ROOTS``) exist before
anything watches or writes below them; the znodes themselves are written by their owners:
a broker its registration, the controller everything else.
"""

from __future__ import annotations

CONTROLLER = "/controller"
"""Ephemeral: the elected controller (``znodes.ControllerRegistration``)."""

CONTROLLER_EPOCH = "/controller_epoch"
"""Persistent: the controller epoch as decimal text; its znode version fences controllers."""

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"

CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"

ADMIN = "/admin"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"

ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"

CLUSTER_ID = "/cluster/id"

CONTROLLED_SHUTDOWN = "/tierlog/controlled_shutdown"
"""Not Kafka's: a broker's shutdown intent, which Kafka sends as a ControlledShutdown
request (kio has no schema for it). Children are ephemeral ``<broker id>`` znodes."""


def controlled_shutdown(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


PERSISTENT_ROOTS = (
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    ADMIN_DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    CONTROLLED_SHUTDOWN,
)
"""Created (if missing) by every broker at start, as Kafka's ``KafkaZkClient`` does."""


def broker(broker_id: int) -> str:
    """Ephemeral registration of a live broker; its czxid is the broker epoch."""
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    """Persistent replica assignment of a topic (``znodes.TopicAssignment``)."""
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def partition(name: str, index: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{index}"


def partition_state(name: str, index: int) -> str:
    """Leader, leader epoch and ISR (``znodes.PartitionState``); Stat.version = partition epoch."""
    return f"{BROKER_TOPICS}/{name}/partitions/{index}/state"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def broker_config(entity: str) -> str:
    """A broker's dynamic configs (``<id>``), or the cluster-wide defaults (``<default>``)."""
    return f"{CONFIG_BROKERS}/{entity}"


def delete_topic_request(name: str) -> str:
    """Presence means the deletion of ``name`` was requested."""
    return f"{ADMIN_DELETE_TOPICS}/{name}"
