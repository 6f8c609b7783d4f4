"""Topic config overrides in cluster mode: one copy, in ``/config/topics/<t>``.

Kafka keeps a topic's overrides in ZooKeeper and every broker applies them from there, so an
AlterConfigs sent to any broker changes the topic on all of them, and a broker that was down
meanwhile applies the change when it comes back. tierlog does the same:

* **Altering** (AlterConfigs, IncrementalAlterConfigs) on any broker reads the overrides
  with their znode version, computes and validates the new set on the event loop, and writes
  it conditional on that version; when another write came first it reads again. The new set
  is applied on this broker before the request is answered. Any broker writes, as in Kafka:
  there is nothing for the controller to decide.
* **Following.** Every broker applies each version it has not applied yet: when the view
  reports a write (a watch on the znode itself; Kafka's ``/config/changes`` notifications
  are not written, as no tierlog broker reads them), when it first sees the topic after a
  start (a topic changed while the broker was down, or adopted from disk with defaults), and
  after creating the topic locally. An older version never replaces a newer one: the view
  reports versions in order, and a version is applied only if it is newer than the one
  applied (for the same topic id, so a re-created topic starts again).
* A set that does not validate here (written by hand with a bad value) is logged, and the
  topic keeps what it had.

Applying goes through ``apply`` (the server's: the local topic store, then tiering's
reaction to the change) one topic change at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from tierlog.cluster.broker_writes import TopicMissingError, ZooKeeperError
from tierlog.cluster.cluster_view import ClusterView, TopicConfig
from tierlog.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

#: Conditional writes lost in a row before AlterConfigs gives up (each loss means another
#: client changed the same topic in between).
_ATTEMPTS = 8

ApplyConfig = Callable[[str, Mapping[str, str]], Awaitable[None]]
ReadConfig = Callable[[str], tuple[dict[str, str], int]]
"""``broker_writes.read_topic_config`` bound to the broker's ZooKeeper client (blocking)."""
WriteConfig = Callable[[str, Mapping[str, str], int], int | None]
"""``broker_writes.write_topic_config`` bound to the broker's ZooKeeper client (blocking)."""


class TopicConfigSync:
    def __init__(
        self,
        apply: ApplyConfig,
        exists: Callable[[str], bool],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        applied: Callable[[str], None] = lambda name: None,
    ) -> None:
        self.apply = apply
        self._exists = exists
        self._spawn = spawn
        self._applied_hook = applied
        """Told the topic's name after each applied version (the replication throttles)."""
        self._applied: dict[str, TopicConfig] = {}
        self._lock = asyncio.Lock()

    def _newer(self, name: str, cfg: TopicConfig) -> bool:
        held = self._applied.get(name)
        return held is None or held.topic_id != cfg.topic_id or cfg.version > held.version

    def created(self, name: str, cfg: TopicConfig) -> None:
        """The topic was created locally with ``cfg``."""
        self._applied[name] = cfg

    def forget(self, name: str) -> None:
        self._applied.pop(name, None)

    def sync(self, name: str, view: ClusterView) -> None:
        """Apply the view's overrides of ``name`` if this broker has the topic and has not
        applied that version yet."""
        cfg = view.topic_config(name)
        if cfg is None or not self._exists(name) or not self._newer(name, cfg):
            return
        self._applied[name] = cfg
        self._spawn(self._apply(name, cfg))

    async def _apply(self, name: str, cfg: TopicConfig) -> None:
        async with self._lock:
            if self._applied.get(name) is not cfg or not self._exists(name):
                return  # a newer version came meanwhile (it is applied instead), or deleted
            try:
                await self.apply(name, cfg.config)
                self._applied_hook(name)
                log.info("%s: config overrides at version %d applied", name, cfg.version)
            except KafkaError as e:
                log.error(
                    "%s: config overrides at version %d not applied: %s",
                    name,
                    cfg.version,
                    e.message,
                )

    async def alter(
        self,
        read: ReadConfig,
        write: WriteConfig,
        view: ClusterView,
        name: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        *,
        validate_only: bool,
    ) -> None:
        """Replace ``name``'s overrides with ``change(current)`` (which validates, raising
        ``KafkaError``), in ZooKeeper and then here."""
        for _ in range(_ATTEMPTS):
            try:
                current, version = await asyncio.to_thread(read, name)
                new = change(current)
                if validate_only:
                    return
                written = await asyncio.to_thread(write, name, new, version)
            except TopicMissingError:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist"
                ) from None
            except ZooKeeperError as e:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper did not take the change: {e}"
                ) from None
            if written is None:
                continue
            assignment = view.topics().get(name)
            cfg = TopicConfig(new, written, None if assignment is None else assignment.topic_id)
            if self._newer(name, cfg):
                self._applied[name] = cfg
                await self._apply(name, cfg)
            return
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"topic {name}'s config was changed by others {_ATTEMPTS} times meanwhile; retry",
        )
