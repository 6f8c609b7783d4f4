"""Settings of the topic-based metadata manager, parsed from its ``rlmm.config.`` props.

Kafka's keys (spec §6.3) plus tierlog's snapshot keys. ``log.dir`` and ``broker.id`` are
passed unprefixed by the broker, as Kafka's RemoteLogManager does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

NUM_PARTITIONS = "remote.log.metadata.topic.num.partitions"
REPLICATION_FACTOR = "remote.log.metadata.topic.replication.factor"
RETENTION_MS = "remote.log.metadata.topic.retention.ms"
CONSUME_WAIT_MS = "remote.log.metadata.consume.wait.ms"
INIT_RETRY_INTERVAL_MS = "remote.log.metadata.initialization.retry.interval.ms"
INIT_RETRY_MAX_TIMEOUT_MS = "remote.log.metadata.initialization.retry.max.timeout.ms"
# tierlog only:
SNAPSHOT_ENABLE = "remote.log.metadata.snapshot.enable"
SNAPSHOT_DIR = "remote.log.metadata.snapshot.dir"
SNAPSHOT_INTERVAL_RECORDS = "remote.log.metadata.snapshot.interval.records"
SNAPSHOT_INTERVAL_MS = "remote.log.metadata.snapshot.interval.ms"
POLL_INTERVAL_MS = "remote.log.metadata.consume.poll.interval.ms"
LOG_DIR = "log.dir"
BROKER_ID = "broker.id"

DEFAULT_SNAPSHOT_SUBDIR = "remote-log-metadata-snapshots"


@dataclass(frozen=True, slots=True)
class TopicBasedRlmmConfig:
    num_partitions: int = 50
    retention_ms: int = -1
    consume_wait_ms: int = 120_000
    init_retry_interval_ms: int = 100
    init_retry_max_timeout_ms: int = 120_000
    snapshot_dir: Path | None = None
    snapshot_interval_records: int = 10_000
    snapshot_interval_ms: int = 30_000
    poll_interval_ms: int = 100
    broker_id: int = 0

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> TopicBasedRlmmConfig:
        def num(key: str, default: int, minimum: int) -> int:
            raw = props.get(key)
            if raw is None:
                return default
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{key}={raw!r} is not an integer") from None
            if value < minimum:
                raise ValueError(f"{key}={value} must be >= {minimum}")
            return value

        snapshot_dir: Path | None = None
        if props.get(SNAPSHOT_ENABLE, "true").strip().lower() != "false":
            if SNAPSHOT_DIR in props:
                snapshot_dir = Path(props[SNAPSHOT_DIR])
            elif LOG_DIR in props:
                snapshot_dir = Path(props[LOG_DIR]) / DEFAULT_SNAPSHOT_SUBDIR
        return cls(
            num_partitions=num(NUM_PARTITIONS, 50, 1),
            retention_ms=num(RETENTION_MS, -1, -1),
            consume_wait_ms=num(CONSUME_WAIT_MS, 120_000, 0),
            init_retry_interval_ms=num(INIT_RETRY_INTERVAL_MS, 100, 0),
            init_retry_max_timeout_ms=num(INIT_RETRY_MAX_TIMEOUT_MS, 120_000, 0),
            snapshot_dir=snapshot_dir,
            snapshot_interval_records=num(SNAPSHOT_INTERVAL_RECORDS, 10_000, 1),
            snapshot_interval_ms=num(SNAPSHOT_INTERVAL_MS, 30_000, 0),
            poll_interval_ms=num(POLL_INTERVAL_MS, 100, 1),
            broker_id=num(BROKER_ID, 0, -1),
        )
