"""kafka-python's admin client, used as an application would: it asks Metadata, DescribeCluster
and DescribeGroups for KIP-430 authorized operations and decodes the bit field into
``ACLOperation`` values, so the broker must answer the field, not its "not requested" value.

With no authorizer, Kafka grants every operation ACLs can name for the resource type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import kafka
import pytest
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from tests.clients.real_clients import (
    KAFKA_INITIAL_REBALANCE_DELAY,
    SESSION_MS,
    create_topic,
    values,
)
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until

TOPIC_OPERATIONS = {
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}
GROUP_OPERATIONS = {"READ", "DESCRIBE", "DELETE"}
CLUSTER_OPERATIONS = {
    "CREATE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "ALTER",
    "DESCRIBE",
}


def _names(operations: object) -> set[str]:
    """kafka-python gives ACLOperation names (admin helpers) or codes (raw responses)."""
    assert isinstance(operations, list | set | tuple), operations
    return {op if isinstance(op, str) else kafka.admin.ACLOperation(op).name for op in operations}


@pytest.fixture
def admin(module_broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    yield client
    client.close()


def test_describe_topics_reports_every_topic_operation(
    module_broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    create_topic(module_broker.bootstrap, "kpa-topic", partitions=2)
    [desc] = admin.describe_topics(["kpa-topic"])
    assert desc["name"] == "kpa-topic"
    assert len(desc["partitions"]) == 2
    assert _names(desc["authorized_operations"]) == TOPIC_OPERATIONS


def test_describe_cluster_reports_every_cluster_operation(admin: KafkaAdminClient) -> None:
    cluster = admin.describe_cluster()
    assert len(cluster["brokers"]) == 1
    assert _names(cluster["authorized_operations"]) == CLUSTER_OPERATIONS


def test_describe_groups_reports_every_group_operation(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory(dict(KAFKA_INITIAL_REBALANCE_DELAY))
    create_topic(b.bootstrap, "kpa-group-topic")
    consumer = kafka.KafkaConsumer(
        "kpa-group-topic",
        bootstrap_servers=b.bootstrap,
        group_id="kpa-group",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=300,
    )
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=100) is not None and consumer.assignment(), 45)
        [(group_id, desc)] = admin.describe_groups(["kpa-group"]).items()
        assert group_id == "kpa-group"
        assert desc["error"] is None
        assert desc["group_state"] == "Stable"
        assert len(desc["members"]) == 1
        assert _names(desc["authorized_operations"]) == GROUP_OPERATIONS
    finally:
        admin.close()
        consumer.close()


def test_delete_records_then_offsets_move(
    module_broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    create_topic(module_broker.bootstrap, "kpa-delete")
    producer = kafka.KafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=5)
    try:
        for v in values("kpa", 10):
            producer.send("kpa-delete", value=v, partition=0)
        producer.flush(30)
    finally:
        producer.close(10)
    tp = TopicPartition("kpa-delete", 0)
    result = admin.delete_records({tp: 4})
    assert result[tp]["low_watermark"] == 4
    consumer = kafka.KafkaConsumer(bootstrap_servers=module_broker.bootstrap)
    try:
        wait_until(lambda: consumer.beginning_offsets([tp])[tp] == 4, 30, what="the log start at 4")
    finally:
        consumer.close()
