"""``tierlog consumer-groups`` on a two-broker cluster (real ZooKeeper), bootstrapped from
broker 1 for a group whose coordinator is broker 2 and a topic with one partition led by
each: the CLI must reach the coordinator and each partition's leader, as Kafka's tool does
through its admin client, or its lag and resets would be wrong or refused."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient

from tests.cli.groups_helpers import commit, committed, groups_cli, table
from tests.helpers import cluster as cluster_helpers
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import coordinator_of
from tests.helpers.poll import wait_until

TOPIC = "spread"


def test_describe_and_reset_reach_a_coordinator_other_than_the_bootstrap_broker(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = cluster_helpers.start_cluster(
        broker_factory,
        zk_connect,
        kazoo_client,
        n=2,
        extra={"offsets.topic.num.partitions": "4", "offsets.topic.replication.factor": "2"},
    )
    cluster_helpers.create_topic(brokers, kazoo_client, TOPIC, [[1, 2], [2, 1]])
    first = brokers[1].bootstrap
    wait_until(lambda: coordinator_of(first, "probe", 0), 30, what="a group coordinator")
    group = next(g for g in (f"remote-{i}" for i in range(200)) if coordinator_of(first, g, 0) == 2)
    everyone = cluster_helpers.bootstrap(brokers)
    cluster_helpers.produce(everyone, TOPIC, [b"a"] * 6, partition=0)
    cluster_helpers.produce(everyone, TOPIC, [b"b"] * 4, partition=1)
    commit(everyone, group, {(TOPIC, 0): 2, (TOPIC, 1): 1})

    described = groups_cli(first, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr
    assert [(r["PARTITION"], r["LOG-END-OFFSET"], r["LAG"]) for r in table(described.stdout)] == [
        ("0", "6", "4"),
        ("1", "4", "3"),
    ]
    state = table(groups_cli(first, "--describe", "--group", group, "--state").stdout)
    assert state[0]["COORDINATOR"].endswith("(2)")
    assert group in groups_cli(first, "--list").stdout.split()

    reset = groups_cli(
        first, "--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute"
    )
    assert reset.returncode == 0, reset.stderr
    assert committed(first, group) == {(TOPIC, 0): 6, (TOPIC, 1): 4}
