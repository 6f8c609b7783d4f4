"""Dynamic broker configs in a cluster live in ``/config/brokers/<default>`` and
``/config/brokers/<id>`` (Kafka's znodes and JSON): a cluster-wide default set through one
broker reaches every broker (and the topics there without an override), a per-broker value
wins over it on that broker only, and a broker that was down applies what changed meanwhile
when it comes back. A value written by hand that does not validate is logged and not
applied: the broker keeps what it had."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.config.sources import ConfigSource
from tierlog.protocol.api_keys import ApiKey

TOPIC = "defaults"
KEY = "log.retention.ms"


def _described(b: BrokerProcess, resource_type: int, name: str, key: str) -> tuple[str, int]:
    """(value, source) of ``key`` as broker ``b`` itself describes the resource."""
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": [key]}
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    entry = next(e for e in r.results[0].configs if e.name == key)
    return str(entry.value), int(entry.config_source)


def _set_default(b: BrokerProcess, value: str) -> None:
    """IncrementalAlterConfigs SET on the default resource ``""`` (librdkafka cannot name it)."""
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [{"name": KEY, "config_operation": 0, "value": value}],
                }
            ],
            validate_only=False,
        )
    assert int(r.responses[0].error_code) == 0, r.responses[0].error_message


def _broker_has(b: BrokerProcess, broker_id: int, value: str, source: ConfigSource) -> bool:
    return _described(b, 4, str(broker_id), KEY) == (value, source) and _described(
        b, 2, TOPIC, "retention.ms"
    ) == (value, source)


def _znode(kazoo: KazooClient, entity: str) -> object:
    return json.loads(kazoo.get(f"/config/brokers/{entity}")[0])


def test_a_cluster_default_reaches_every_broker_and_a_broker_value_wins_on_its_broker(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, n=3)
    c.create_topic(brokers, kazoo_client, TOPIC, [[1, 2, 3]])
    default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG

    _set_default(brokers[1], "5000000")
    assert _znode(kazoo_client, "<default>") == {"version": 1, "config": {KEY: "5000000"}}
    for i, b in brokers.items():
        wait_until(partial(_broker_has, b, i, "5000000", default), 20, what=f"{i} has it")

    admin = AdminClient({"bootstrap.servers": c.bootstrap(brokers)})
    res = ConfigResource(
        ConfigResource.Type.BROKER,
        "2",
        incremental_configs=[
            ConfigEntry(KEY, "6000000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)
    assert _znode(kazoo_client, "2") == {"version": 1, "config": {KEY: "6000000"}}
    assert _broker_has(brokers[2], 2, "6000000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    for i in (1, 3):
        assert _broker_has(brokers[i], i, "5000000", default)

    brokers[3].stop()
    _set_default(brokers[1], "7000000")
    brokers[3].start()
    wait_until(partial(_broker_has, brokers[3], 3, "7000000", default), 30, what="3 caught up")
    wait_until(partial(_broker_has, brokers[1], 1, "7000000", default), 20, what="1 has it")
    assert _broker_has(brokers[2], 2, "6000000", ConfigSource.DYNAMIC_BROKER_CONFIG)

    # by hand, as zookeeper-shell would: an invalid default, then a valid per-broker value;
    # the watches report them in that order, so once the second shows, the first was seen
    kazoo_client.set(
        "/config/brokers/<default>", b'{"version":1,"config":{"log.retention.ms":"soon"}}'
    )
    kazoo_client.create(
        "/config/brokers/1", b'{"version":1,"config":{"log.segment.bytes":"3000000"}}'
    )
    wait_until(
        lambda: _described(brokers[1], 4, "1", "log.segment.bytes")[0] == "3000000",
        20,
        what="1 applied its own znode",
    )
    assert _described(brokers[1], 4, "1", KEY) == ("7000000", default)
    assert "not applied" in brokers[1].stderr
