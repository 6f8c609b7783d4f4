"""Cluster-mode config keys: Kafka's names, defaults and validation (KafkaConfig)."""

from __future__ import annotations

from typing import Any

import pytest

from tierlog.cluster.settings import ClusterSettings
from tierlog.config import ConfigError, load_broker_config
from tierlog.config.zookeeper_connect import ZooKeeperConnect, parse_zookeeper_connect

KAFKA_DEFAULTS: dict[str, Any] = {
    "zookeeper.connect": None,
    "zookeeper.session.timeout.ms": 18000,
    "zookeeper.connection.timeout.ms": None,
    "broker.id": -1,
    "broker.rack": None,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.response.max.bytes": 10485760,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.backoff.ms": 1000,
    "num.replica.fetchers": 1,
    "offsets.topic.replication.factor": 3,
    "controlled.shutdown.enable": True,
    "controlled.shutdown.max.retries": 3,
    "controlled.shutdown.retry.backoff.ms": 5000,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.check.interval.seconds": 300,
    "leader.imbalance.per.broker.percentage": 10,
    "delete.topic.enable": True,
}


def test_kafka_defaults() -> None:
    config = load_broker_config({})
    for key, default in KAFKA_DEFAULTS.items():
        assert config.get(key) == default, key


def test_without_zookeeper_connect_the_broker_is_single_node() -> None:
    config = load_broker_config({})
    assert ClusterSettings.from_config(config) is None
    with pytest.raises(ConfigError, match=r"default\.replication\.factor"):
        load_broker_config({"default.replication.factor": "3"})


def test_cluster_settings() -> None:
    config = load_broker_config(
        {
            "zookeeper.connect": "zk1:2181,zk2/kafka/prod",
            "broker.id": "7",
            "broker.rack": "r1",
            "zookeeper.session.timeout.ms": "6000",
            "default.replication.factor": "3",
            "advertised.listeners": "PLAINTEXT://h7:9092",
        }
    )
    settings = ClusterSettings.from_config(config)
    assert settings is not None
    assert config.node_id == 7
    assert settings.broker_id == 7
    assert settings.zookeeper == ZooKeeperConnect((("zk1", 2181), ("zk2", 2181)), "/kafka/prod")
    assert settings.session_timeout_ms == 6000
    assert settings.connection_timeout_ms == 6000
    assert settings.rack == "r1"
    assert [str(e) for e in settings.advertised_listeners] == ["PLAINTEXT://h7:9092"]


def test_broker_id_is_an_alias_of_node_id() -> None:
    assert load_broker_config({"broker.id": "3"}).node_id == 3
    assert load_broker_config({"broker.id": "3", "node.id": "3"}).node_id == 3
    assert load_broker_config({"node.id": "4"}).node_id == 4
    with pytest.raises(ConfigError, match=r"broker\.id"):
        load_broker_config({"broker.id": "3", "node.id": "4"})
    with pytest.raises(ConfigError, match=r"broker\.id"):
        load_broker_config({"broker.id": "-2"})


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"zookeeper.connect": ""}, "zookeeper.connect"),
        ({"zookeeper.connect": "zk:2181/a/"}, "zookeeper.connect"),
        ({"zookeeper.connect": "zk:2181/a//b"}, "zookeeper.connect"),
        ({"zookeeper.connect": "zk:port"}, "zookeeper.connect"),
        ({"zookeeper.connect": "zk:2181,,zk2:2181"}, "zookeeper.connect"),
        ({"zookeeper.session.timeout.ms": "0"}, "zookeeper.session.timeout.ms"),
        ({"replica.fetch.max.bytes": "-1"}, "replica.fetch.max.bytes"),
        (
            {"leader.imbalance.check.interval.seconds": "0"},
            "leader.imbalance.check.interval.seconds",
        ),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"offsets.topic.replication.factor": "0"}, "offsets.topic.replication.factor"),
        (
            {
                "replica.fetch.wait.max.ms": "40000",
                "replica.lag.time.max.ms": "30000",
                "replica.socket.timeout.ms": "60000",
            },
            "replica.fetch.wait.max.ms",
        ),
        (
            {"replica.fetch.wait.max.ms": "20000", "replica.socket.timeout.ms": "10000"},
            "replica.socket.timeout.ms",
        ),
        ({"broker.id": "1001"}, "broker.id"),
    ],
)
def test_invalid_values_name_the_key(raw: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_broker_config(raw)
    assert err.value.key == key


def test_connect_string_parsing() -> None:
    assert parse_zookeeper_connect("127.0.0.1:2181") == ZooKeeperConnect(
        (("127.0.0.1", 2181),), None
    )
    parsed = parse_zookeeper_connect("a:1,b:2/chroot")
    assert parsed.hosts_string == "a:1,b:2"
    assert parsed.chroot == "/chroot"
    assert str(parsed) == "a:1,b:2/chroot"
    assert parse_zookeeper_connect("a:1/").chroot is None
