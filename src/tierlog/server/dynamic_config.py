"""The one owner of a running broker's config: dynamic broker configs (Kafka's KIP-226).

``DynamicBrokerConfig`` holds the static config (``server.properties`` and overrides), the
cluster-wide defaults (entity ``<default>``) and this broker's own values (entity ``<id>``),
and the effective ``current`` config made of the three. Components whose state depends on a
key that can change live register a ``Reconfigurable`` for their keys; a change is checked
against every affected one before it is stored, and once applied each is told the new config
(Kafka's ``BrokerReconfigurable``). Nothing reads config on a hot path to notice a change.

* **Altering** (AlterConfigs, IncrementalAlterConfigs on a BROKER resource) reads the
  entity's stored values with their version, computes the new set, checks the keys
  (``config.dynamic_broker``), the cross-key rules of the resulting config and the
  components' own rules, stores the set conditionally on that version (reading again when
  another writer came first) and applies it before answering.
* **Following** (cluster mode): every broker watches ``/config/brokers/<default>`` and its own
  ``/config/brokers/<id>`` and applies each newer version. A stored set that no longer checks
  (written by hand, or by another broker whose static config differs) is logged and not
  applied, as Kafka does; the broker keeps what it had.
* A single node reads its file at start, before any component is built, so the components
  start with the dynamic values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from tierlog.config.broker import BrokerConfig
from tierlog.config.definitions import ConfigError
from tierlog.config.dynamic_broker import (
    DEFAULT_ENTITY,
    DynamicUpdateRefused,
    check_dynamic_set,
)
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.dynamic_config_store import ConfigStore, ZooKeeperError, ZooKeeperStore

log = logging.getLogger(__name__)

#: Conditional writes lost in a row before an alteration gives up.
_ATTEMPTS = 8


@dataclass(frozen=True)
class Reconfigurable:
    """A component's hook: told the new config when one of ``keys`` changed value."""

    name: str
    keys: frozenset[str]
    apply: Callable[[BrokerConfig], Awaitable[None]]
    #: Refuses a new config with ``ConfigError`` (the component's own rules), before storing.
    validate: Callable[[BrokerConfig], Awaitable[None]] | None = None


NewValues = Callable[[dict[str, str]], dict[str, str]]
"""The entity's stored values -> its complete new set (may raise ``KafkaError``)."""


class DynamicBrokerConfig:
    def __init__(self, static: BrokerConfig, store: ConfigStore) -> None:
        self.static = static
        self.current = static
        self._store = store
        self._entity = str(static.node_id)
        self._levels: dict[str, tuple[dict[str, str], int]] = {
            DEFAULT_ENTITY: ({}, -1),
            self._entity: ({}, -1),
        }
        self._reconfigurables: list[Reconfigurable] = []
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closers: list[Callable[[], None]] = []

    @property
    def entity(self) -> str:
        """This broker's entity name (its id)."""
        return self._entity

    def add_reconfigurable(self, r: Reconfigurable) -> None:
        self._reconfigurables.append(r)

    # ---- start ---------------------------------------------------------------------------
    def start_with(self, default: Mapping[str, str], own: Mapping[str, str]) -> BrokerConfig:
        """At start, before components exist: take the stored values (a single node's file)
        and return the config to build them with. Values that no longer check are left out
        with an error logged, as Kafka starts without dynamic values it cannot apply."""
        for entity, values in ((DEFAULT_ENTITY, default), (self._entity, own)):
            try:
                normal = check_dynamic_set(values, self.static)
                self.current = self._merged({entity: normal})
                self._levels[entity] = (normal, -1)
            except (ConfigError, DynamicUpdateRefused) as e:
                log.error("dynamic configs of %s not applied: %s", entity, e)
        return self.current

    async def follow(self, store: ZooKeeperStore) -> None:
        """Cluster mode: apply ``/config/brokers/<default>`` and ``<id>`` now and whenever
        they change."""
        self._store = store
        self._loop = asyncio.get_running_loop()
        for entity in (DEFAULT_ENTITY, self._entity):
            try:
                values, version = await store.read(entity)
            except ZooKeeperError as e:
                log.error("dynamic configs of %s not read: %s", entity, e)
                continue
            await self._apply(entity, values, version)
        watch = await asyncio.to_thread(store.watch, (DEFAULT_ENTITY, self._entity), self._seen)
        self._closers.append(watch.close)

    def close(self) -> None:
        for close in self._closers:
            close()
        for task in self._tasks:
            task.cancel()

    def _seen(self, entity: str, values: dict[str, str], version: int) -> None:
        """kazoo's thread: a version of a watched znode; applied on the loop."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._spawn_apply, entity, values, version)
        except RuntimeError:  # the loop is closed: shutting down
            pass

    def _spawn_apply(self, entity: str, values: dict[str, str], version: int) -> None:
        task = asyncio.get_running_loop().create_task(self._apply(entity, values, version))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- altering ------------------------------------------------------------------------
    async def alter(self, entity: str, new_values: NewValues, *, validate_only: bool) -> None:
        """Replace ``entity``'s dynamic values with ``new_values(stored)``: checked, stored,
        then applied here. ``KafkaError`` with Kafka's code on a refusal."""
        for _ in range(_ATTEMPTS):
            try:
                stored, version = await self._store.read(entity)
            except ZooKeeperError as e:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper: {e}") from None
            values = await self.check(entity, new_values(stored))
            if validate_only:
                return
            try:
                written = await self._store.write(entity, values, version)
            except ZooKeeperError as e:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper: {e}") from None
            if written is None:
                continue
            await self._apply(entity, values, written)
            return
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"the dynamic configs of {entity} were changed by others {_ATTEMPTS} times "
            "meanwhile; retry",
        )

    async def check(self, entity: str, values: Mapping[str, str]) -> dict[str, str]:
        """``values`` as ``entity``'s new set, normalised, or ``KafkaError`` saying why not."""
        try:
            normal = check_dynamic_set(values, self.static)
            candidate = self._merged({entity: normal})
        except DynamicUpdateRefused as e:
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        for r in self._affected(candidate):
            if r.validate is None:
                continue
            try:
                await r.validate(candidate)
            except ConfigError as e:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        return normal

    # ---- applying ------------------------------------------------------------------------
    async def _apply(self, entity: str, values: dict[str, str], version: int) -> None:
        async with self._lock:
            held, held_version = self._levels.get(entity, ({}, -1))
            if version >= 0 and version <= held_version:
                return
            if version < 0 and not held:
                return
            try:
                normal = check_dynamic_set(values, self.static)
                new = self._merged({entity: normal})
                for r in self._affected(new):
                    if r.validate is not None:
                        await r.validate(new)
            except (ConfigError, DynamicUpdateRefused) as e:
                log.error("dynamic configs of %s at version %d not applied: %s", entity, version, e)
                return
            self._levels[entity] = (normal, version)
            old, self.current = self.current, new
            log.info("dynamic configs of %s at version %d: %s", entity, version, normal)
            for r in self._affected(new, old):
                try:
                    await r.apply(new)
                except Exception:
                    log.exception("%s did not take the new broker config", r.name)

    def _merged(self, replacing: Mapping[str, dict[str, str]] | None = None) -> BrokerConfig:
        levels = {e: v for e, (v, _) in self._levels.items()}
        levels.update(replacing or {})
        return self.static.with_dynamic(levels[DEFAULT_ENTITY], levels[self._entity])

    def _affected(self, new: BrokerConfig, old: BrokerConfig | None = None) -> list[Reconfigurable]:
        if old is None:
            old = self.current
        changed = {k for k in new.values if new.values[k] != old.values.get(k)}
        return [r for r in self._reconfigurables if r.keys & changed]
