"""Where client quota settings are kept, per mode, and how every change reaches
``ClientQuotas``.

* Single node: ``client-quotas.json`` in the first log dir, every entity's settings by
  Kafka's entity path, rewritten whole and crash-safe (``state_files``) on each change, so
  quotas survive a restart; a damaged file stops the start (``StateFileError``) rather
  than serve without the quotas the operator set.
* Cluster mode: Kafka's znodes (``tierlog.cluster.entity_configs``). A write goes to
  ZooKeeper with its change notification, and every broker (this one too) applies what the
  notification names; the writer also applies it at once, so its own next request sees it.
  ``read_all`` reads ZooKeeper, so DescribeClientQuotas answers what the cluster holds.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from pathlib import Path

from tierlog.cluster.entity_configs import (
    EntityConfigWatcher,
    read_entity_config,
    read_entity_configs,
    write_entity_config,
)
from tierlog.cluster.node import ClusterNode
from tierlog.server.quotas.entities import CONFIG_TYPES, QuotaEntity
from tierlog.server.quotas.manager import ClientQuotas
from tierlog.server.state_files import StateFileError, read_json, write_json

log = logging.getLogger(__name__)

STATE_FILE = "client-quotas.json"


class QuotaStore(abc.ABC):
    """The durable copy of every entity's quota settings."""

    def __init__(self, quotas: ClientQuotas) -> None:
        self.quotas = quotas

    @abc.abstractmethod
    async def start(self) -> None:
        """Load every entity into ``quotas`` and follow changes from then on."""

    @abc.abstractmethod
    async def read_all(self) -> dict[str, dict[str, str]]:
        """Every entity's settings, by entity path."""

    @abc.abstractmethod
    async def read(self, entity_path: str) -> dict[str, str]:
        """One entity's settings (empty when it has none)."""

    @abc.abstractmethod
    async def write(self, entity_path: str, config: dict[str, str]) -> None:
        """Replace one entity's settings durably, and apply them."""

    async def close(self) -> None:
        return None


def _checked(obj: object, path: Path) -> dict[str, dict[str, str]]:
    entities = obj.get("entities") if isinstance(obj, dict) else None
    if not isinstance(entities, dict):
        raise StateFileError(f"{path} has no 'entities' object; restore it or remove it")
    out: dict[str, dict[str, str]] = {}
    for entity_path, config in entities.items():
        if QuotaEntity.from_path(str(entity_path)) is None or not isinstance(config, dict):
            raise StateFileError(f"{path}: {entity_path!r} is not a quota entity")
        out[str(entity_path)] = {str(k): str(v) for k, v in config.items()}
    return out


class LocalQuotaStore(QuotaStore):
    def __init__(self, quotas: ClientQuotas, state_dir: Path) -> None:
        super().__init__(quotas)
        self.path = state_dir / STATE_FILE
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        obj = read_json(self.path)
        self.quotas.replace_all({} if obj is None else _checked(obj, self.path))

    async def read_all(self) -> dict[str, dict[str, str]]:
        return self.quotas.configs()

    async def read(self, entity_path: str) -> dict[str, str]:
        return self.quotas.config(entity_path)

    async def write(self, entity_path: str, config: dict[str, str]) -> None:
        async with self._lock:
            entities = self.quotas.configs()
            if config:
                entities[entity_path] = dict(config)
            else:
                entities.pop(entity_path, None)
            await asyncio.to_thread(write_json, self.path, {"version": 1, "entities": entities})
            self.quotas.update(entity_path, config)


class ZooKeeperQuotaStore(QuotaStore):
    def __init__(self, quotas: ClientQuotas, node: ClusterNode) -> None:
        super().__init__(quotas)
        self._zk = node.member.zk.kazoo
        self._watcher: EntityConfigWatcher | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def changed(entity_path: str, config: dict[str, str]) -> None:
            loop.call_soon_threadsafe(self.quotas.update, entity_path, config)

        watcher = EntityConfigWatcher(self._zk, CONFIG_TYPES, changed)
        await asyncio.to_thread(watcher.start)
        self._watcher = watcher
        self.quotas.replace_all(await self.read_all())

    async def read_all(self) -> dict[str, dict[str, str]]:
        return await asyncio.to_thread(read_entity_configs, self._zk, CONFIG_TYPES)

    async def read(self, entity_path: str) -> dict[str, str]:
        return await asyncio.to_thread(read_entity_config, self._zk, entity_path)

    async def write(self, entity_path: str, config: dict[str, str]) -> None:
        await asyncio.to_thread(write_entity_config, self._zk, entity_path, config)
        self.quotas.update(entity_path, config)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
