"""``MetadataTopicIO`` over a real ``tierlog.log.LogManager``.

Lives with the tests because ``tiered.metadata`` may not import ``tierlog.log``; the broker
owns the production adapter and can start from this one.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping

from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches
from tierlog.tiered.metadata import METADATA_TOPIC, MetadataTopicIO


class LogManagerMetadataTopicIO(MetadataTopicIO):
    def __init__(self, logs: LogManager, max_read_bytes: int = 1 << 20) -> None:
        self._logs = logs
        self._lock = threading.Lock()
        self._max_read_bytes = max_read_bytes

    def _partitions(self) -> dict[int, PartitionLog]:
        return {
            lg.tp.partition: lg for lg in self._logs.all_logs() if lg.tp.topic == METADATA_TOPIC
        }

    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        with self._lock:
            existing = self._partitions()
            if existing:
                return len(existing)
            cfg = LogConfig(
                retention_ms=int(configs.get("retention.ms", "-1")),
                retention_bytes=int(configs.get("retention.bytes", "-1")),
                cleanup_policy=tuple(configs.get("cleanup.policy", "delete").split(",")),
                remote_storage_enable=False,
            )
            topic_id = uuid.uuid4()
            for p in range(num_partitions):
                self._logs.create_log(TopicPartition(METADATA_TOPIC, p), topic_id, cfg)
            return num_partitions

    def _log(self, partition: int) -> PartitionLog:
        lg = self._logs.get_log(TopicPartition(METADATA_TOPIC, partition))
        if lg is None:
            raise KeyError(f"{METADATA_TOPIC}-{partition} does not exist")
        return lg

    def append(self, partition: int, key: bytes | None, value: bytes) -> int:
        lg = self._log(partition)
        result = lg.append_as_leader(build_batch([SimpleRecord(value, key)]), leader_epoch=0)
        lg.flush()
        return result.base_offset

    def end_offset(self, partition: int) -> int:
        return self._log(partition).log_end_offset

    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        lg = self._log(partition)
        if from_offset >= lg.log_end_offset:
            return []
        data = lg.read(from_offset, self._max_read_bytes).to_bytes()
        out: list[tuple[int, bytes]] = []
        for h in scan_batches(data):
            for r in iter_records(data[h.position : h.end]):
                if r.offset >= from_offset and r.value is not None:
                    out.append((r.offset, r.value))
        return out
