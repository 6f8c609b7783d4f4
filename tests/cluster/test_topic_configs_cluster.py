"""Topic configs in a cluster live in ``/config/topics/<t>``: an AlterConfigs sent to one
broker changes the topic on every broker, a broker that was down meanwhile (even one that
lost its own record of the topic and adopted it from disk with defaults) applies the change
when it comes back, and an invalid change is refused without touching ZooKeeper."""

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
from tierlog.cluster import paths
from tierlog.cluster.znodes import TopicConfigOverrides
from tierlog.protocol.api_keys import ApiKey

TOPIC = "tuned"


def _retention(b: BrokerProcess) -> str | None:
    """``retention.ms`` as this broker itself describes the topic."""
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": ["retention.ms"]}
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    res = r.results[0]
    if int(res.error_code) != 0:
        return None
    return next(str(e.value) for e in res.configs if e.name == "retention.ms")


def _has_retention(b: BrokerProcess, value: str) -> bool:
    return _retention(b) == value


def _set_retention(admin: AdminClient, value: str) -> None:
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)


def _zk_config(kazoo: KazooClient) -> dict[str, str]:
    return dict(TopicConfigOverrides.decode(kazoo.get(paths.topic_config(TOPIC))[0]).config)


def test_a_topic_config_change_reaches_every_broker_and_one_that_was_down(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, n=2)
    c.create_topic(brokers, kazoo_client, TOPIC, [[1, 2]], {"retention.ms": "1000000"})
    first, second = brokers[1], brokers[2]
    admin = AdminClient({"bootstrap.servers": first.bootstrap})

    _set_retention(admin, "2000000")
    assert _zk_config(kazoo_client) == {"retention.ms": "2000000"}
    for b in (first, second):
        wait_until(partial(_has_retention, b, "2000000"), 20, what=f"{b.bootstrap} applied it")

    second.stop()
    _set_retention(admin, "3000000")
    # the broker comes back without its record of the topic: it adopts the logs it finds
    # with the broker's defaults, and must still end with ZooKeeper's overrides
    topics_file = second.log_dir / "__tierlog_topics.json"
    saved = json.loads(topics_file.read_text())
    del saved["topics"][TOPIC]
    topics_file.write_text(json.dumps(saved))
    second.start()
    wait_until(partial(_has_retention, second, "3000000"), 30, what="applied after its return")

    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    refused = admin.incremental_alter_configs([bad])[bad].exception(30)
    assert refused is not None and "retention.ms" in str(refused)
    assert _zk_config(kazoo_client) == {"retention.ms": "3000000"}
    assert _retention(first) == "3000000"
