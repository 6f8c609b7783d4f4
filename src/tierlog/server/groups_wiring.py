"""Building the group coordinator from broker config.

Kept apart from ``broker.py`` so the choice of offsets store (log-backed
``__consumer_offsets`` when available) is made in one place.
"""

from __future__ import annotations

from typing import Any

from tierlog.config.broker import BrokerConfig
from tierlog.server.group import (
    OFFSETS_TOPIC,
    CoordinatorNode,
    GroupCoordinator,
    GroupCoordinatorConfig,
)
from tierlog.server.group.log_store import LogOffsetsStore
from tierlog.server.topics import TopicManager

#: ``__consumer_offsets`` must never lose commits to retention; the topic keeps everything
#: and the coordinator replays it on start. Its compaction (Kafka's) needs the store's
#: tombstones and load path first, so it stays ``delete`` even on a broker whose
#: ``log.cleanup.policy`` is ``compact``.
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "segment.bytes": "104857600",
}


async def build_group_coordinator(
    cfg: BrokerConfig, topics: TopicManager, advertised: tuple[str, int]
) -> GroupCoordinator:
    host, port = advertised

    def partition_exists(topic: str, partition: int) -> bool:
        return topics.get_log(topic, partition) is not None

    offsets = topics.ensure(OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, OFFSETS_TOPIC_CONFIGS)

    def log_for(partition: int) -> Any:
        plog = topics.get_log(OFFSETS_TOPIC, partition)
        if plog is None:
            raise KeyError(f"{OFFSETS_TOPIC}-{partition} does not exist")
        return plog

    coordinator = GroupCoordinator(
        node=CoordinatorNode(cfg.node_id, host, port),
        store=LogOffsetsStore(log_for, offsets.partitions),
        config=GroupCoordinatorConfig(
            initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=cfg.group_min_session_timeout_ms,
            max_session_timeout_ms=cfg.group_max_session_timeout_ms,
            offsets_topic_num_partitions=offsets.partitions,
            offsets_retention_ms=int(cfg.get("offsets.retention.minutes")) * 60_000,
        ),
        partition_exists=partition_exists,
    )
    await coordinator.start()
    return coordinator
