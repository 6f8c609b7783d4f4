"""Cross-key rules of cluster mode (``zookeeper.connect`` set), as KafkaConfig checks them.

* ``broker.id`` is ``node.id``'s ZooKeeper-mode name: when set (not -1) it gives ``node.id``,
  and if both are set explicitly they must be equal.
* With ``broker.id.generation.enable``, an explicit ``broker.id`` at most
  ``reserved.broker.max.id``: Kafka hands out generated ids above it, so a larger configured id
  could collide with one.
* ``replica.fetch.wait.max.ms`` at most ``replica.socket.timeout.ms`` (a fetch parked on the
  leader would outlast the socket waiting for it) and at most ``replica.lag.time.max.ms`` (a
  follower waiting in a fetch longer than the lag allowance would drop out of the ISR while
  idle).
* Replication factors above 1 need a cluster: a single node cannot place two replicas.
* ``queued.max.request.bytes``, when bounded (> 0), at least ``socket.request.max.bytes``:
  a request as large as the broker accepts must fit in it (this one holds on a single node
  too).
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from tierlog.config.definitions import ConfigError


def apply_cluster_rules(values: dict[str, Any], explicit: Set[str]) -> None:
    """Check the rules and resolve the ``broker.id`` alias into ``values["node.id"]``."""
    broker_id = values["broker.id"]
    if broker_id != -1:
        if "node.id" in explicit and values["node.id"] != broker_id:
            raise ConfigError(
                "broker.id",
                f"{broker_id} differs from node.id {values['node.id']}; set one, or both equal",
            )
        values["node.id"] = broker_id
        if values["broker.id.generation.enable"] and broker_id > values["reserved.broker.max.id"]:
            raise ConfigError(
                "broker.id",
                f"{broker_id} exceeds reserved.broker.max.id {values['reserved.broker.max.id']} "
                "while broker.id.generation.enable is true",
            )
    if values["replica.fetch.wait.max.ms"] > values["replica.socket.timeout.ms"]:
        raise ConfigError(
            "replica.socket.timeout.ms",
            "must be at least replica.fetch.wait.max.ms: a follower's fetch may wait that long "
            "on the leader before any byte comes back",
        )
    if values["replica.fetch.wait.max.ms"] > values["replica.lag.time.max.ms"]:
        raise ConfigError(
            "replica.fetch.wait.max.ms",
            "should always be less than or equal to replica.lag.time.max.ms to prevent "
            "frequent changes in ISR",
        )
    queued = values["queued.max.request.bytes"]
    if 0 < queued < values["socket.request.max.bytes"]:
        raise ConfigError(
            "queued.max.request.bytes",
            f"{queued} is below socket.request.max.bytes ({values['socket.request.max.bytes']}): "
            "the largest request the broker accepts would never fit",
        )
    if values["zookeeper.connect"] is None and values["default.replication.factor"] != 1:
        raise ConfigError(
            "default.replication.factor",
            "a single-node tierlog broker only supports 1 (set zookeeper.connect for a cluster)",
        )
