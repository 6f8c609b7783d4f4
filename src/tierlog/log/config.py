"""Typed topic-level settings the log engine reads.

The config layer (``tierlog.config``) parses and validates Kafka keys and fills this in; the
log never sees a raw properties dictionary. Defaults are Kafka's, so a ``LogConfig()`` behaves
like a topic with no overrides on a broker with no overrides.
"""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    """One field per topic key (``segment.bytes`` -> ``segment_bytes``)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    producer_id_expiration_ms: int = 86_400_000
    """Broker-level (``producer.id.expiration.ms``), carried here so one object drives a log."""

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    def effective_local_retention_ms(self, tiered_copy_enabled: bool) -> int:
        """Spec §1.8: local.* applies only while a tiered topic is uploading; -2 inherits."""
        if tiered_copy_enabled and self.local_retention_ms != -2:
            return self.local_retention_ms
        return self.retention_ms

    def effective_local_retention_bytes(self, tiered_copy_enabled: bool) -> int:
        if tiered_copy_enabled and self.local_retention_bytes != -2:
            return self.local_retention_bytes
        return self.retention_bytes
