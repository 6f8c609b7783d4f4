"""Auto topic creation in cluster mode (``auto.create.topics.enable``; Kafka's
``KafkaApis.createTopic`` in ZooKeeper mode): a producer's Metadata for an unknown topic
creates it through ZooKeeper with ``num.partitions`` and ``default.replication.factor``,
answers LEADER_NOT_AVAILABLE until the controller has elected its leaders, and the records
the producer then sends are acknowledged by every replica and read back. DescribeLogDirs
on such a topic reports every broker's replicas."""

from __future__ import annotations

from collections.abc import Callable

import confluent_kafka
import kafka
from kazoo.client import KazooClient

from tests.cluster.test_group_coordinator import bootstrap, start_cluster
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.znodes import TopicAssignment
from tierlog.protocol.api_keys import ApiKey

AUTO = {
    "auto.create.topics.enable": "true",
    "num.partitions": "2",
    "default.replication.factor": "3",
}


def _assignment(kazoo: KazooClient, topic: str) -> TopicAssignment:
    return TopicAssignment.decode(kazoo.get(paths.topic(topic))[0])


def _read_back(servers: str, topic: str, expected: int) -> list[bytes]:
    consumer = kafka.KafkaConsumer(
        topic, bootstrap_servers=servers, auto_offset_reset="earliest", consumer_timeout_ms=20000
    )
    got: list[bytes] = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == expected:
            break
    consumer.close()
    return got


def test_producers_auto_create_a_replicated_topic(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = start_cluster(broker_factory, zk_connect, kazoo_client, AUTO)
    servers = bootstrap(brokers)

    producer = confluent_kafka.Producer({"bootstrap.servers": servers, "acks": "all"})
    for i in range(50):
        producer.produce("auto-confluent", b"c%03d" % i)
    assert producer.flush(60) == 0

    kp = kafka.KafkaProducer(bootstrap_servers=servers, acks="all")
    for i in range(50):
        kp.send("auto-kafka-python", b"k%03d" % i).get(timeout=60)
    kp.close()

    for topic, prefix in (("auto-confluent", b"c"), ("auto-kafka-python", b"k")):
        assignment = _assignment(kazoo_client, topic)
        assert len(assignment.partitions) == 2
        assert all(sorted(r) == [1, 2, 3] for r in assignment.partitions.values())
        got = _read_back(servers, topic, 50)
        assert sorted(got) == [prefix + b"%03d" % i for i in range(50)]


def test_metadata_answers_leader_not_available_while_the_topic_is_created(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = start_cluster(broker_factory, zk_connect, kazoo_client, AUTO)
    with WireConnection.to_bootstrap(brokers[2].bootstrap) as conn:

        def ask(allow: bool) -> int:
            r = conn.call(
                ApiKey.METADATA, 9, topics=[{"name": "fresh"}], allow_auto_topic_creation=allow
            )
            return int(r.topics[0].error_code)

        assert ask(False) == 3  # UNKNOWN_TOPIC_OR_PARTITION: the client did not allow it
        assert kazoo_client.exists(paths.topic("fresh")) is None
        assert ask(True) == 5  # LEADER_NOT_AVAILABLE: being created
        wait_until(lambda: ask(True) == 0, 30, what="the auto-created topic with leaders")
    assert sorted(_assignment(kazoo_client, "fresh").partitions) == [0, 1]


def test_describe_log_dirs_lists_each_brokers_replicas(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """DescribeLogDirs (API 35) on every broker of the cluster, with kafka-python: each
    broker reports the replicas it holds, and after acks=all they have the same size."""
    brokers = start_cluster(broker_factory, zk_connect, kazoo_client, AUTO)
    servers = bootstrap(brokers)
    kp = kafka.KafkaProducer(bootstrap_servers=servers, acks="all")
    for i in range(40):
        kp.send("sized", b"s%03d" % i, partition=i % 2).get(timeout=60)
    kp.close()
    admin = kafka.KafkaAdminClient(bootstrap_servers=servers)

    def sizes() -> dict[int, dict[int, int]] | None:
        out: dict[int, dict[int, int]] = {}
        for entry in admin.describe_log_dirs(["sized"]):
            (log_dir,) = entry["log_dirs"]
            assert log_dir["error_code"] == 0
            for t in log_dir["topics"]:
                out[entry["broker"]] = {
                    p["partition_index"]: p["partition_size"] for p in t["partitions"]
                }
        complete = sorted(out) == [1, 2, 3] and all(sorted(s) == [0, 1] for s in out.values())
        same = complete and len({tuple(sorted(s.items())) for s in out.values()}) == 1
        return out if same else None

    try:
        found = wait_until(sizes, 30, what="every replica reported with the same sizes")
    finally:
        admin.close()
    assert all(size > 0 for size in found[1].values())
