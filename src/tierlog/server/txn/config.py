"""Settings of the transaction coordinator, named after the Kafka broker keys they come from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnCoordinatorConfig:
    # transaction.max.timeout.ms: the largest transaction.timeout.ms a client may ask for.
    max_timeout_ms: int = 900_000
    # transactional.id.expiration.ms
    id_expiration_ms: int = 604_800_000
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000
    # transaction.state.log.num.partitions: never changes once the topic exists.
    state_log_num_partitions: int = 50
    # offsets.topic.num.partitions: where AddOffsetsToTxn puts a group's partition.
    offsets_topic_num_partitions: int = 50

    def __post_init__(self) -> None:
        if self.max_timeout_ms < 1:
            raise ValueError("max_timeout_ms must be >= 1")
        if self.id_expiration_ms < 1:
            raise ValueError("id_expiration_ms must be >= 1")
        if self.abort_timed_out_interval_ms < 1 or self.remove_expired_interval_ms < 1:
            raise ValueError("cleanup intervals must be positive")
        if self.state_log_num_partitions < 1 or self.offsets_topic_num_partitions < 1:
            raise ValueError("partition counts must be >= 1")
