"""``tierlog transactions`` and ``tierlog log-dirs`` on a two-broker cluster (real
ZooKeeper), bootstrapped from broker 1 for a transactional id coordinated by broker 2 and a
topic with one partition led by each: every request must reach the broker that answers it
(every broker for ListTransactions and DescribeLogDirs, the coordinator for
DescribeTransactions, the leader for DescribeProducers and WriteTxnMarkers, or the follower a
``--broker-id`` names), as Kafka's admin client sends them, or the tools would list nothing or
be refused."""

from __future__ import annotations

import json
from collections.abc import Callable

from kazoo.client import KazooClient

from tests.cli.txn_helpers import rows, stable_and_high, txn_cli
from tests.helpers import cluster as cluster_helpers
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import coordinator_of
from tests.helpers.poll import wait_until
from tests.helpers.txn_clients import transactional_producer

TOPIC = "spread"


def test_each_request_reaches_the_broker_that_must_answer_it(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = cluster_helpers.start_cluster(
        broker_factory,
        zk_connect,
        kazoo_client,
        n=2,
        extra={
            "offsets.topic.num.partitions": "2",
            "offsets.topic.replication.factor": "2",
            "transaction.state.log.num.partitions": "4",
            "transaction.state.log.replication.factor": "2",
        },
    )
    cluster_helpers.create_topic(brokers, kazoo_client, TOPIC, [[1, 2], [2, 1]])
    first = brokers[1].bootstrap
    wait_until(
        lambda: coordinator_of(first, "probe", 1),
        30,
        what="a transaction coordinator",
    )
    tid = next(t for t in (f"app-{i}" for i in range(200)) if coordinator_of(first, t, 1) == 2)
    producer = transactional_producer(
        cluster_helpers.bootstrap(brokers), tid, **{"transaction.timeout.ms": 600_000}
    )
    producer.begin_transaction()
    for p in (0, 1):
        producer.produce(TOPIC, b"pending", partition=p)
    assert producer.flush(30) == 0

    listed = txn_cli(first, "list")
    assert [(x["TransactionalId"], x["Coordinator"]) for x in rows(listed.stdout)] == [(tid, "2")]
    (described,) = rows(txn_cli(first, "describe", "--transactional-id", tid).stdout)
    assert described["CoordinatorId"] == "2"
    assert described["TopicPartitions"] == f"{TOPIC}-0,{TOPIC}-1"
    on_leader = txn_cli(first, "describe-producers", "--topic", TOPIC, "--partition", "1")
    assert [x["CurrentTransactionStartOffset"] for x in rows(on_leader.stdout)] == ["0"]

    def on_follower() -> list[str] | None:
        """Broker 1 follows partition 1: it answers from the producer state it replicated."""
        r = txn_cli(
            first, "describe-producers", "--topic", TOPIC, "--partition", "1", "--broker-id", "1"
        )
        assert r.returncode == 0, r.stderr
        return [x["CurrentTransactionStartOffset"] for x in rows(r.stdout)] or None

    assert wait_until(on_follower, 30, interval_s=0.2, what="the follower's producers") == ["0"]

    hanging = txn_cli(first, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
    assert hanging.returncode == 0, hanging.stderr
    assert rows(hanging.stdout) == []

    aborted = txn_cli(first, "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    assert stable_and_high(brokers[2].bootstrap, TOPIC, 1) == (2, 2)
    assert stable_and_high(brokers[1].bootstrap, TOPIC, 0) == (0, 1)

    r = cluster_helpers.run_cli(
        "log-dirs", "--bootstrap-server", first, "--describe", "--topic-list", TOPIC
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "Received log directory information from brokers 1,2"
    described_dirs = json.loads(lines[2])["brokers"]
    assert [b["broker"] for b in described_dirs] == [1, 2]
    for b in described_dirs:
        (log_dir,) = b["logDirs"]
        assert [p["partition"] for p in log_dir["partitions"]] == [f"{TOPIC}-0", f"{TOPIC}-1"]
        assert all(p["size"] > 0 for p in log_dir["partitions"])
