"""The settings of cluster mode, taken once from the broker's typed config."""

from __future__ import annotations

from dataclasses import dataclass, field

from tierlog.cluster.controller import ControllerSettings
from tierlog.config import BrokerConfig, Endpoint
from tierlog.config.zookeeper_connect import ZooKeeperConnect, parse_zookeeper_connect


@dataclass(frozen=True)
class ClusterSettings:
    broker_id: int
    zookeeper: ZooKeeperConnect
    session_timeout_ms: int
    connection_timeout_ms: int
    advertised_listeners: tuple[Endpoint, ...]
    rack: str | None
    unclean_leader_election_enable: bool = False
    """The broker default; a topic's own ``unclean.leader.election.enable`` overrides it."""
    controller: ControllerSettings = field(default_factory=ControllerSettings)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ClusterSettings | None:
        """None when ``zookeeper.connect`` is unset: the single-node mode."""
        connect = config.get("zookeeper.connect")
        if connect is None:
            return None
        session_ms = int(config.get("zookeeper.session.timeout.ms"))
        connection_ms = config.get("zookeeper.connection.timeout.ms")
        return cls(
            broker_id=config.node_id,
            zookeeper=parse_zookeeper_connect(connect),
            session_timeout_ms=session_ms,
            connection_timeout_ms=session_ms if connection_ms is None else int(connection_ms),
            advertised_listeners=tuple(config.advertised_listeners),
            rack=config.get("broker.rack"),
            unclean_leader_election_enable=bool(config.get("unclean.leader.election.enable")),
            controller=ControllerSettings(
                auto_leader_rebalance_enable=bool(config.get("auto.leader.rebalance.enable")),
                leader_imbalance_check_interval_s=float(
                    config.get("leader.imbalance.check.interval.seconds")
                ),
                leader_imbalance_per_broker_percentage=int(
                    config.get("leader.imbalance.per.broker.percentage")
                ),
                delete_topic_enable=bool(config.get("delete.topic.enable")),
            ),
        )
