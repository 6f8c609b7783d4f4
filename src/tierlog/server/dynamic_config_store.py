"""Where a broker's dynamic configs are kept: ZooKeeper in a cluster, a state file alone.

Both stores hold, per entity (``<default>`` or a broker id), the text values an AlterConfigs
left, with a version for conditional writes. In a cluster they are Kafka's znodes
(``cluster.broker_configs``), which every broker watches. A single node keeps them in
``<first log dir>/__tierlog_broker_configs.json``, replaced whole and crash-safely
(``state_files``), so a restart starts with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from tierlog.cluster.broker_configs import (
    BrokerConfigWatch,
    read_broker_config,
    write_broker_config,
)
from tierlog.cluster.broker_writes import ZooKeeperError
from tierlog.server.state_files import StateFileError, read_json, write_json

STATE_FILE = "__tierlog_broker_configs.json"


class ConfigStore(Protocol):
    async def read(self, entity: str) -> tuple[dict[str, str], int]:
        """The entity's values and their version (-1: none stored yet)."""
        ...

    async def write(self, entity: str, config: Mapping[str, str], version: int) -> int | None:
        """Store ``config`` if the entity is still at ``version``; the new version, or None
        when another writer came first."""
        ...


class FileStore:
    """A single node's dynamic configs: one JSON file, ``{"version": 1, "brokers": {entity:
    {"version": n, "config": {...}}}}``. Only this broker writes it, on its event loop."""

    def __init__(self, state_dir: Path) -> None:
        self._path = state_dir / STATE_FILE
        self._entities: dict[str, tuple[dict[str, str], int]] = {}
        stored = read_json(self._path) or {}
        try:
            for entity, held in stored.get("brokers", {}).items():
                config = {str(k): str(v) for k, v in held["config"].items()}
                self._entities[str(entity)] = (config, int(held["version"]))
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise StateFileError(f"{self._path} is damaged ({e!r}); restore it or remove it") from e

    def stored(self, entity: str) -> dict[str, str]:
        return dict(self._entities.get(entity, ({}, -1))[0])

    async def read(self, entity: str) -> tuple[dict[str, str], int]:
        config, version = self._entities.get(entity, ({}, -1))
        return dict(config), version

    async def write(self, entity: str, config: Mapping[str, str], version: int) -> int | None:
        held = self._entities.get(entity, ({}, -1))[1]
        if held != version:
            return None
        self._entities[entity] = (dict(config), held + 1)
        write_json(
            self._path,
            {
                "version": 1,
                "brokers": {
                    e: {"version": v, "config": c} for e, (c, v) in sorted(self._entities.items())
                },
            },
        )
        return held + 1


class NotJoinedStore:
    """Cluster mode before the broker has its ZooKeeper session: AlterConfigs on a broker
    resource answers that it cannot be stored yet (REQUEST_TIMED_OUT, retriable)."""

    async def read(self, entity: str) -> tuple[dict[str, str], int]:
        raise ZooKeeperError("this broker has not joined the cluster yet")

    async def write(self, entity: str, config: Mapping[str, str], version: int) -> int | None:
        raise ZooKeeperError("this broker has not joined the cluster yet")


class ZooKeeperStore:
    """``/config/brokers/<entity>`` through the broker's ZooKeeper session (kazoo's client,
    handed over by ``server.cluster_mode``: only ``tierlog.cluster`` imports kazoo)."""

    def __init__(self, zk: Any) -> None:
        self._zk = zk

    async def read(self, entity: str) -> tuple[dict[str, str], int]:
        return await asyncio.to_thread(read_broker_config, self._zk, entity)

    async def write(self, entity: str, config: Mapping[str, str], version: int) -> int | None:
        return await asyncio.to_thread(write_broker_config, self._zk, entity, config, version)

    def watch(
        self, entities: tuple[str, ...], on_change: Callable[[str, dict[str, str], int], None]
    ) -> BrokerConfigWatch:
        """Arm the watches of ``entities`` (blocking: run it off the loop)."""
        watch = BrokerConfigWatch(self._zk, entities, on_change)
        watch.start()
        return watch


__all__ = [
    "STATE_FILE",
    "ConfigStore",
    "FileStore",
    "NotJoinedStore",
    "ZooKeeperError",
    "ZooKeeperStore",
]
