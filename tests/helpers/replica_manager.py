"""A ``ReplicaManager`` on real local logs and no ZooKeeper, for tests that drive it with
partition states directly (``ReplicaManager._apply``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tierlog.config.broker import load_broker_config
from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.replication.manager import ReplicaManager

ME = 1


class LocalTopicsStandIn:
    """The broker's topic manager as replication uses it: ``topics`` (name to partition
    count) exist locally with their logs; the log of a partition the broker stops hosting
    is deleted, as the broker's topic manager does."""

    def __init__(self, logs: LogManager, topics: Mapping[str, int]) -> None:
        self.logs = logs
        self.topics = dict(topics)
        for topic, count in self.topics.items():
            for p in range(count):
                logs.create_log(TopicPartition(topic, p), uuid.uuid4())

    def get(self, name: str) -> Any:
        count = self.topics.get(name)
        return None if count is None else SimpleNamespace(name=name, partitions=count)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get_log(TopicPartition(topic, partition))

    def open_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.get_log(topic, partition)

    def close_log(self, topic: str, partition: int) -> Path | None:
        tp = TopicPartition(topic, partition)
        return None if self.logs.get_log(tp) is None else self.logs.delete_log(tp, remove=False)

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        raise AssertionError("not used")

    def all(self) -> list[Any]:
        return []

    def effective_config(self, info: Any) -> dict[str, Any]:
        return {"min.insync.replicas": 1}

    def create(self, name: str, *a: Any, **kw: Any) -> Any:
        raise AssertionError("not used")

    def replace_configs(self, name: str, configs: Mapping[str, str | None]) -> None:
        raise AssertionError("not used")

    def delete(self, name: str) -> Any:
        raise AssertionError("not used")


@asynccontextmanager
async def replica_manager(
    tmp_path: Path, topics: Mapping[str, int], **overrides: str
) -> AsyncIterator[ReplicaManager]:
    """Broker ``ME`` in cluster mode (an unreachable ZooKeeper: nothing here connects)."""
    logs = LogManager([tmp_path], LogConfig())
    logs.load()
    config = load_broker_config(
        {
            "log.dirs": str(tmp_path),
            "broker.id": str(ME),
            "zookeeper.connect": "127.0.0.1:1",
            **{k.replace("_", "."): v for k, v in overrides.items()},
        }
    )
    m = ReplicaManager(config, LocalTopicsStandIn(logs, topics), logs, lambda _key: None)
    try:
        yield m
    finally:
        await m.close()
        logs.shutdown()
