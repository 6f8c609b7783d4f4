"""Auto topic creation in cluster mode (``auto.create.topics.enable``; Kafka's
``KafkaApis.createTopic`` in ZooKeeper mode): a producer's Metadata for an unknown topic
creates it through ZooKeeper with ``num.partitions`` and ``default.replication.factor``,
answers LEADER_NOT_AVAILABLE until the controller has elected its leaders, and the records
the producer then sends are acknowledged by every replica and read back."""

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
