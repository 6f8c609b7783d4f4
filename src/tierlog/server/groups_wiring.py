"""Building the group coordinator from broker config.

Kept apart from ``broker.py`` so the choice of offsets store (log-backed
``__consumer_offsets`` when available) is made in one place.
"""

from __future__ import annotations

from tierlog.server.group import (
    CoordinatorNode,
    GroupCoordinator,
    GroupCoordinatorConfig,
    MemoryOffsetsStore,
)
from tierlog.server.state import BrokerState


async def build_group_coordinator(state: BrokerState) -> GroupCoordinator:
    cfg = state.config
    host, port = state.advertised
    topics = state.topics

    def partition_exists(topic: str, partition: int) -> bool:
        return topics.get_log(topic, partition) is not None

    coordinator = GroupCoordinator(
        node=CoordinatorNode(cfg.node_id, host, port),
        store=MemoryOffsetsStore(),
        config=GroupCoordinatorConfig(
            initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=cfg.group_min_session_timeout_ms,
            max_session_timeout_ms=cfg.group_max_session_timeout_ms,
            offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
            offsets_retention_ms=int(cfg.get("offsets.retention.minutes")) * 60_000,
        ),
        partition_exists=partition_exists,
    )
    await coordinator.start()
    return coordinator
