"""Settings of the group coordinator, named after the Kafka broker keys they come from.

The server builds this from its typed broker config; the coordinator never reads a
properties map, so a wrong key cannot silently fall back to a default here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCoordinatorConfig:
    # group.initial.rebalance.delay.ms: lets a burst of starting consumers join one rebalance.
    initial_rebalance_delay_ms: int = 3000
    # group.min.session.timeout.ms / group.max.session.timeout.ms
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    # group.max.size
    max_size: int = 2**31 - 1
    # offsets.topic.num.partitions
    offsets_topic_num_partitions: int = 50
    # offset.metadata.max.bytes
    offset_metadata_max_bytes: int = 4096
    # offsets.retention.minutes, in ms
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    # offsets.retention.check.interval.ms
    offsets_retention_check_interval_ms: int = 600_000

    def __post_init__(self) -> None:
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("initial_rebalance_delay_ms must be >= 0")
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("need 0 < min_session_timeout_ms <= max_session_timeout_ms")
        if self.max_size < 1:
            raise ValueError("max_size must be >= 1")
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets_topic_num_partitions must be >= 1")
        if self.offsets_retention_ms < 1 or self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offset retention settings must be positive")
