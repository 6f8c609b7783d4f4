"""An in-process ``MetadataTopicIO``: the topic as lists in memory.

Used by unit tests and the replay benchmark; a "restart" is a new manager over the same
object. Not durable across processes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from tierlog.tiered.metadata.topic_io import MetadataTopicIO


class InMemoryMetadataTopicIO(MetadataTopicIO):
    def __init__(self, max_batch: int = 2000) -> None:
        self._lock = threading.Lock()
        self._partitions: list[list[bytes]] | None = None
        self.configs: dict[str, str] = {}
        self.max_batch = max_batch

    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        with self._lock:
            if self._partitions is None:
                self._partitions = [[] for _ in range(num_partitions)]
                self.configs = dict(configs)
            return len(self._partitions)

    def _part(self, partition: int) -> list[bytes]:
        if self._partitions is None:
            raise RuntimeError("metadata topic does not exist")
        return self._partitions[partition]

    def append(self, partition: int, key: bytes | None, value: bytes) -> int:
        with self._lock:
            records = self._part(partition)
            records.append(value)
            return len(records) - 1

    def end_offset(self, partition: int) -> int:
        with self._lock:
            return len(self._part(partition))

    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        with self._lock:
            records = self._part(partition)
            end = min(len(records), from_offset + self.max_batch)
            return [(o, records[o]) for o in range(from_offset, end)]
