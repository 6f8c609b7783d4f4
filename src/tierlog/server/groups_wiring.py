"""Building the group coordinator from broker config.

Kept apart from ``broker.py`` so the choice of offsets store (log-backed
``__consumer_offsets`` when available) is made in one place. In cluster mode the topic is a
cluster topic (created through ZooKeeper on the first FindCoordinator, replicated with
``offsets.topic.replication.factor``), the coordinator follows the leadership of its
partitions, and writes wait for the ISR.
"""

from __future__ import annotations

from typing import Any

from tierlog.config.broker import BrokerConfig
from tierlog.config.topic import render_overrides
from tierlog.protocol.records import Compression
from tierlog.replication.manager import ReplicaManager
from tierlog.server.auto_topics import AutoTopics
from tierlog.server.group import (
    OFFSETS_TOPIC,
    CoordinatorNode,
    GroupCoordinator,
    GroupCoordinatorConfig,
)
from tierlog.server.group.cluster_placement import ClusterPlacement
from tierlog.server.group.log_store import LogOffsetsStore
from tierlog.server.group.placement import CoordinatorPlacement
from tierlog.server.group.replicated_store import ReplicatedOffsetsStore
from tierlog.server.group.store import OffsetsStore
from tierlog.server.topics import TopicManager

#: What a ``__consumer_offsets`` created before it was compacted was given; such a topic
#: is switched to ``offsets_topic_configs`` on start (its records already carry keys).
LEGACY_OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "segment.bytes": "104857600",
}


def offsets_topic_configs(cfg: BrokerConfig) -> dict[str, str]:
    """Kafka's ``__consumer_offsets`` configs: compacted only (no time or size retention,
    so a live offset is never lost), ``offsets.topic.segment.bytes`` segments, and the
    coordinator's own codec kept as written."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(int(cfg.get("offsets.topic.segment.bytes"))),
        "compression.type": "producer",
    }


def _ensure_offsets_topic(cfg: BrokerConfig, topics: TopicManager) -> int:
    wanted = offsets_topic_configs(cfg)
    info = topics.ensure(OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, wanted)
    if render_overrides(info.overrides) == LEGACY_OFFSETS_TOPIC_CONFIGS:
        topics.replace_configs(OFFSETS_TOPIC, dict(wanted))
    return info.partitions


def group_coordinator_config(cfg: BrokerConfig, partitions: int) -> GroupCoordinatorConfig:
    """The coordinator's settings from the broker keys; ``partitions`` is the number of
    ``__consumer_offsets`` partitions actually in use (an existing topic keeps its own)."""
    return GroupCoordinatorConfig(
        initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=cfg.group_min_session_timeout_ms,
        max_session_timeout_ms=cfg.group_max_session_timeout_ms,
        max_size=int(cfg.get("group.max.size")),
        offsets_topic_num_partitions=partitions,
        offset_metadata_max_bytes=int(cfg.get("offset.metadata.max.bytes")),
        offsets_retention_ms=int(cfg.get("offsets.retention.minutes")) * 60_000,
        offsets_retention_check_interval_ms=int(cfg.get("offsets.retention.check.interval.ms")),
    )


async def build_group_coordinator(
    cfg: BrokerConfig,
    topics: TopicManager,
    advertised: tuple[str, int],
    replication: ReplicaManager | None = None,
) -> GroupCoordinator:
    host, port = advertised

    def partition_exists(topic: str, partition: int) -> bool:
        """Kafka asks its metadata cache: in cluster mode the view, which knows a topic
        before this broker has created its local logs (or hosts none of its replicas)."""
        view = None if replication is None else replication.view
        if view is not None and replication is not None and replication.manages(topic):
            return view.partition(topic, partition) is not None
        return topics.get_log(topic, partition) is not None

    def log_for(partition: int) -> Any:
        plog = topics.get_log(OFFSETS_TOPIC, partition)
        if plog is None:
            raise KeyError(f"{OFFSETS_TOPIC}-{partition} does not exist")
        return plog

    compression = Compression(int(cfg.get("offsets.topic.compression.codec")))
    load_buffer_bytes = int(cfg.get("offsets.load.buffer.size"))
    store: OffsetsStore
    placement: CoordinatorPlacement | None = None
    if replication is None:
        partitions = _ensure_offsets_topic(cfg, topics)
        store = LogOffsetsStore(
            log_for, partitions, compression=compression, load_buffer_bytes=load_buffer_bytes
        )
    else:
        partitions = cfg.offsets_topic_num_partitions
        store = ReplicatedOffsetsStore(
            replication,
            log_for,
            partitions,
            commit_timeout_ms=int(cfg.get("offsets.commit.timeout.ms")),
            compression=compression,
            load_buffer_bytes=load_buffer_bytes,
        )
        placement = ClusterPlacement(
            replication,
            AutoTopics(replication),
            partitions,
            int(cfg.get("offsets.topic.replication.factor")),
            offsets_topic_configs(cfg),
        )

    coordinator = GroupCoordinator(
        node=CoordinatorNode(cfg.node_id, host, port),
        store=store,
        config=group_coordinator_config(cfg, partitions),
        partition_exists=partition_exists,
        placement=placement,
    )
    await coordinator.start()
    if replication is not None:
        replication.add_leadership_listener(OFFSETS_TOPIC, coordinator)
    return coordinator
