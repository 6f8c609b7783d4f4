"""Dynamic broker configs in ZooKeeper: ``/config/brokers/<id>`` and ``/config/brokers/<default>``.

Kafka's layout and JSON (``{"version":1,"config":{...}}``, text values). As with topic
configs (``replication.topic_configs``), every broker watches the two znodes it applies (its
own id and ``<default>``) instead of reading ``/config/changes`` notifications, which no
tierlog broker writes or reads. A write is conditional on the znode version the writer read,
so two AlterConfigs racing on one entity never lose one another's keys silently: the loser
reads again. The functions block; run them off the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from tierlog.cluster import paths
from tierlog.cluster.broker_writes import ZooKeeperError
from tierlog.cluster.znodes import BrokerConfigOverrides, ZnodeFormatError

log = logging.getLogger(__name__)

OnBrokerConfig = Callable[[str, dict[str, str], int], None]
"""(entity, config, znode version or -1 when there is no znode), on kazoo's callback thread."""


def read_broker_config(zk: KazooClient, entity: str) -> tuple[dict[str, str], int]:
    """The entity's dynamic configs and their znode version (-1: no znode yet)."""
    try:
        data, stat = zk.get(paths.broker_config(entity))
        return dict(BrokerConfigOverrides.decode(data).config), int(stat.version)
    except NoNodeError:
        return {}, -1
    except (KazooException, OSError, ZnodeFormatError) as e:
        raise ZooKeeperError(repr(e)) from e


def write_broker_config(
    zk: KazooClient, entity: str, config: Mapping[str, str], version: int
) -> int | None:
    """Replace the entity's dynamic configs if the znode is still at ``version`` (-1: create
    it); the new version, or None when another write came first."""
    data = BrokerConfigOverrides(dict(config)).encode()
    path = paths.broker_config(entity)
    try:
        if version < 0:
            zk.create(path, data, makepath=True)
            return 0
        return int(zk.set(path, data, version).version)
    except (BadVersionError, NodeExistsError, NoNodeError):
        return None
    except (KazooException, OSError) as e:
        raise ZooKeeperError(repr(e)) from e


class BrokerConfigWatch:
    """Reports every version of the watched entities' znodes, in order, to ``on_change``.

    kazoo's ``DataWatch`` reads the data and re-arms in one call and survives reconnects, so
    a change made while the session was away is reported when it comes back.
    """

    def __init__(self, zk: KazooClient, entities: tuple[str, ...], on_change: OnBrokerConfig):
        self._zk = zk
        self._entities = entities
        self._on_change = on_change
        self._closed = threading.Event()

    def start(self) -> None:
        """Arm the watches; each reports the znode's current content before this returns."""
        for entity in self._entities:
            DataWatch(self._zk, paths.broker_config(entity), self._callback(entity))

    def close(self) -> None:
        """Stop reporting; each watch ends at its next event."""
        self._closed.set()

    def _callback(self, entity: str) -> Callable[[bytes | None, ZnodeStat | None], bool]:
        def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool:
            if self._closed.is_set():
                return False
            config: dict[str, str] = {}
            if data is not None:
                try:
                    config = dict(BrokerConfigOverrides.decode(data).config)
                except ZnodeFormatError as e:
                    log.error("ignoring %s: %s", paths.broker_config(entity), e)
                    return True
            version = -1 if stat is None or data is None else int(stat.version)
            try:
                self._on_change(entity, config, version)
            except Exception:
                log.exception("broker config listener failed on %s", entity)
            return True

        return on_data
