"""``tierlog configs`` on a two-broker cluster (real ZooKeeper), bootstrapped from broker 1:
a broker's configs are asked of that broker (any other answers INVALID_REQUEST for a broker
id not its own), and topic configs and client quotas changed through broker 1 reach
broker 2 through ZooKeeper, where they are read back over the wire."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient

from tests.helpers import client_quotas
from tests.helpers import cluster as cluster_helpers
from tests.helpers.broker import BrokerProcess
from tests.helpers.client_quotas import MATCH_EXACT
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.config.sources import ConfigSource
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType


def _topic_overrides(bootstrap: str, topic: str) -> dict[str, str]:
    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {
                    "resource_type": ConfigResourceType.TOPIC,
                    "resource_name": topic,
                    "configuration_keys": None,
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    return {
        str(e.name): str(e.value)
        for e in r.results[0].configs
        if int(e.config_source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }


def test_requests_reach_the_broker_that_answers_them(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = cluster_helpers.start_cluster(broker_factory, zk_connect, kazoo_client, n=2)
    cluster_helpers.create_topic(brokers, kazoo_client, "shared", [[1, 2]])
    first, second = brokers[1].bootstrap, brokers[2].bootstrap

    def configs(*args: str) -> str:
        r = cluster_helpers.run_cli("configs", "--bootstrap-server", first, *args)
        assert r.returncode == 0, r.stderr
        return r.stdout

    shown = configs("--describe", "--broker", "2", "--all").splitlines()
    assert shown[0] == "All configs for broker 2 are:"
    assert any(line.startswith("  broker.id=2 sensitive=false synonyms={") for line in shown)
    assert configs("--describe", "--entity-type", "brokers").splitlines() == [
        "Dynamic configs for broker 1 are:",
        "Dynamic configs for broker 2 are:",
        "Default configs for brokers in the cluster are:",
    ]

    configs("--alter", "--topic", "shared", "--add-config", "retention.ms=7200000")
    wait_until(
        lambda: _topic_overrides(second, "shared").get("retention.ms") == "7200000",
        20,
        what="broker 2 applying the topic config",
    )

    configs("--alter", "--client", "everywhere", "--add-config", "producer_byte_rate=2048")
    exact = [("client-id", MATCH_EXACT, "everywhere")]
    assert wait_until(
        lambda: client_quotas.describe(second, exact, strict=True)[2], 20, what="the quota"
    ) == {(("client-id", "everywhere"),): {"producer_byte_rate": 2048.0}}
