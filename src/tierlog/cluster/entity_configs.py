"""Kafka's dynamic entity configs in ZooKeeper, and the change notifications every broker
follows (``AdminZkClient.changeConfigs``, ``ZkNodeChangeNotificationListener``).

* An entity's settings are ``/config/<entity path>`` (``/config/users/<u>``,
  ``/config/users/<u>/clients/<c>``, ``/config/clients/<c>``, ``/config/ips/<ip>``), holding
  ``{"version":1,"config":{key: text}}``. A parent created on the way (``/config/users/<u>``
  for a user/client pair) may be empty, which reads as no settings. Removing the last key
  leaves the znode with an empty ``config``, as Kafka does.
* Each write is followed by a persistent sequential ``/config/changes/config_change_<N>``
  holding ``{"version":2,"entity_path":"<entity path>"}``, so every broker, Kafka's or
  tierlog's, re-reads that entity. Kafka's older version 1 form (``entity_type`` and
  ``entity_name``) is read too. Notifications older than 15 minutes are deleted by whoever
  processes notifications, as Kafka purges them.

Reads and writes block (run them off the event loop) and report a ZooKeeper failure as
``ZooKeeperError``. The watcher's callback runs on kazoo's thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from tierlog.cluster import paths
from tierlog.cluster.broker_writes import ZooKeeperError

log = logging.getLogger(__name__)

NOTIFICATION_PREFIX = "config_change_"
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
"""Kafka's ``changeExpirationMs``: how long a processed notification is kept."""


def _config_path(entity_path: str) -> str:
    return f"{paths.CONFIG}/{entity_path}"


def decode_entity_config(data: bytes) -> dict[str, str]:
    """The settings of an entity znode; an empty or unreadable znode has none."""
    if not data:
        return {}
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    config = obj.get("config") if isinstance(obj, dict) else None
    if not isinstance(config, dict):
        return {}
    return {str(k): str(v) for k, v in config.items()}


def encode_entity_config(config: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(sorted(config.items()))}).encode()


def read_entity_config(zk: KazooClient, entity_path: str) -> dict[str, str]:
    try:
        data, _ = zk.get(_config_path(entity_path))
    except NoNodeError:
        return {}
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e
    return decode_entity_config(data)


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return sorted(zk.get_children(path))
    except NoNodeError:
        return []


def read_entity_configs(zk: KazooClient, config_types: Iterable[str]) -> dict[str, dict[str, str]]:
    """Every entity of those config types (``users``, ``clients``, ``ips``) with settings,
    by entity path; user/client pairs are read below each user."""
    out: dict[str, dict[str, str]] = {}
    try:
        for ctype in config_types:
            for name in _children(zk, _config_path(ctype)):
                path = f"{ctype}/{name}"
                config = read_entity_config(zk, path)
                if config:
                    out[path] = config
                if ctype != "users":
                    continue
                for client in _children(zk, _config_path(f"{path}/clients")):
                    child = f"{path}/clients/{client}"
                    config = read_entity_config(zk, child)
                    if config:
                        out[child] = config
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e
    return out


def write_entity_config(zk: KazooClient, entity_path: str, config: dict[str, str]) -> None:
    """Replace an entity's settings, then announce the change to every broker."""
    data = encode_entity_config(config)
    path = _config_path(entity_path)
    note = json.dumps({"version": 2, "entity_path": entity_path}).encode()
    try:
        try:
            zk.set(path, data)
        except NoNodeError:
            try:
                zk.create(path, data, makepath=True)
            except NodeExistsError:
                zk.set(path, data)
        zk.create(
            f"{paths.CONFIG_CHANGES}/{NOTIFICATION_PREFIX}",
            note,
            sequence=True,
            makepath=True,
        )
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e


def notified_entity_path(data: bytes) -> str | None:
    """The entity path a change notification names (version 2, or Kafka's version 1)."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("version") == 2 and isinstance(obj.get("entity_path"), str):
        return str(obj["entity_path"])
    if isinstance(obj.get("entity_type"), str) and isinstance(obj.get("entity_name"), str):
        return f"{obj['entity_type']}/{obj['entity_name']}"
    return None


def _sequence(name: str) -> int:
    try:
        return int(name[len(NOTIFICATION_PREFIX) :])
    except ValueError:
        return -1


class EntityConfigWatcher:
    """Follows ``/config/changes`` and hands each changed entity of ``config_types``, with its
    settings read again, to ``on_change(entity_path, config)`` (on kazoo's thread).

    Only notifications after those present at ``start`` are processed: the caller reads
    every entity once right after starting the watch, so nothing between is lost. A
    notification whose entity could not be read is processed again at the next change of
    ``/config/changes`` (kazoo re-arms the watch after a new session).
    """

    def __init__(
        self,
        zk: KazooClient,
        config_types: Iterable[str],
        on_change: Callable[[str, dict[str, str]], None],
    ) -> None:
        self._zk = zk
        self._types = tuple(config_types)
        self._on_change = on_change
        self._last = -1
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> None:
        try:
            existing = _children(self._zk, paths.CONFIG_CHANGES)
        except (KazooException, OSError) as e:
            raise ZooKeeperError(repr(e)) from e
        self._last = max((_sequence(n) for n in existing), default=-1)
        ChildrenWatch(self._zk, paths.CONFIG_CHANGES, self._on_children)

    def stop(self) -> None:
        self._stopped = True

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        try:
            self._process(children)
        except (KazooException, OSError, ZooKeeperError) as e:
            log.warning("could not process config change notifications: %r", e)
        return True

    def _process(self, children: list[str]) -> None:
        with self._lock:
            now_ms = time.time() * 1000
            for name in sorted(children, key=_sequence):
                seq = _sequence(name)
                note = f"{paths.CONFIG_CHANGES}/{name}"
                try:
                    data, stat = self._zk.get(note)
                except NoNodeError:
                    continue
                if seq > self._last:
                    self._apply(data)
                    self._last = seq
                if now_ms - stat.ctime >= NOTIFICATION_EXPIRY_MS:
                    try:
                        self._zk.delete(note)
                    except NoNodeError:
                        pass

    def _apply(self, data: bytes) -> None:
        entity_path = notified_entity_path(data)
        if entity_path is None:
            log.warning("ignoring an unreadable config change notification: %r", data[:200])
            return
        if entity_path.split("/", 1)[0] not in self._types:
            return
        self._on_change(entity_path, read_entity_config(self._zk, entity_path))
