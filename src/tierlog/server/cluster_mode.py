"""The broker's hook into cluster mode: on when ``zookeeper.connect`` is set, absent otherwise.

``ClusterMode.start`` registers the broker under ``/brokers/ids`` with the address it gives
clients (its one served listener, port 0 resolved), lets it contend for controller and, while
it is controller, keeps partition leadership following broker membership (``ClusterNode``);
``close`` ends its ZooKeeper session, so the registration (and ``/controller`` if it held it)
disappears at once instead of after the session timeout. ZooKeeper calls block, so both run
off the event loop; ``ClusterMember`` keeps its own thread for everything in between.

The broker serves as leader or follower of what the node's view says through the
replication layer (``tierlog.replication``), which the broker starts on this node.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from tierlog.cluster.node import ClusterNode
from tierlog.cluster.settings import ClusterSettings
from tierlog.config import BrokerConfig, Endpoint

log = logging.getLogger(__name__)


class ClusterMode:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node

    @classmethod
    async def start(cls, config: BrokerConfig, advertised: tuple[str, int]) -> ClusterMode | None:
        """Join the cluster, or None in single-node mode (no ``zookeeper.connect``)."""
        settings = ClusterSettings.from_config(config)
        if settings is None:
            return None
        served = Endpoint(settings.advertised_listeners[0].listener, *advertised)
        settings = dataclasses.replace(settings, advertised_listeners=(served,))
        node = ClusterNode(settings)
        await asyncio.to_thread(node.start)
        log.info("joined the cluster at %s as broker %d", settings.zookeeper, settings.broker_id)
        return cls(node)

    @property
    def controller_id(self) -> int | None:
        return self.node.controller_id

    async def close(self) -> None:
        await asyncio.to_thread(self.node.close)
