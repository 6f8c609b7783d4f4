"""Topic administration through confluent-kafka's AdminClient: create (with configs and
validate-only), describe, alter (incremental and legacy whole-set), delete and re-create."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import (  # where the typed names live (not re-exported)
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.cimpl import NewTopic

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until

TIMEOUT = 30


@pytest.fixture
def admin(module_broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": module_broker.bootstrap})


def _configs(admin: AdminClient, topic: str) -> dict[str, Any]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    result: dict[str, Any] = admin.describe_configs([res])[res].result(TIMEOUT)
    return result


def _topic_id(admin: AdminClient, topic: str) -> str:
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)
    return str(desc.topic_id)


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    fs = admin.create_topics(
        [NewTopic("adm-dry", 2, 1, config={"retention.ms": "60000"})], validate_only=True
    )
    fs["adm-dry"].result(TIMEOUT)
    assert "adm-dry" not in admin.list_topics(timeout=TIMEOUT).topics
    # and validation still applies Kafka's rules
    bad = admin.create_topics(
        [NewTopic("adm-dry-bad", 1, 1, config={"retention.ms": "soon"})], validate_only=True
    )
    with pytest.raises(ck.KafkaException) as e:
        bad["adm-dry-bad"].result(TIMEOUT)
    assert e.value.args[0].code() == ck.KafkaError.INVALID_CONFIG


def test_create_with_configs_then_describe(admin: AdminClient) -> None:
    configs = {"retention.ms": "3600000", "segment.bytes": "1048576", "max.message.bytes": "4096"}
    admin.create_topics([NewTopic("adm-desc", 3, 1, config=configs)])["adm-desc"].result(TIMEOUT)

    desc = admin.describe_topics(TopicCollection(["adm-desc"]))["adm-desc"].result(TIMEOUT)
    assert desc.name == "adm-desc"
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id == 0 for p in desc.partitions)

    got = _configs(admin, "adm-desc")
    for key, value in configs.items():
        assert got[key].value == value
        assert got[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert got["cleanup.policy"].value == "delete"
    assert got["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_incremental_alter_sets_and_deletes(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("adm-inc", 1, 1, config={"retention.ms": "3600000"})])[
        "adm-inc"
    ].result(TIMEOUT)
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        "adm-inc",
        incremental_configs=[
            ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    got = _configs(admin, "adm-inc")
    assert got["retention.bytes"].value == "1000000"
    assert got["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert got["retention.ms"].value == "604800000"
    assert got["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_legacy_alter_replaces_the_whole_set(admin: AdminClient) -> None:
    admin.create_topics(
        [NewTopic("adm-alter", 1, 1, config={"retention.ms": "3600000", "segment.ms": "60000"})]
    )["adm-alter"].result(TIMEOUT)
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm-alter", set_config={"segment.ms": "1000"})
    admin.alter_configs([res])[res].result(TIMEOUT)
    got = _configs(admin, "adm-alter")
    assert got["segment.ms"].value == "1000"
    # AlterConfigs is not incremental: a key left out goes back to its default
    assert got["retention.ms"].value == "604800000"
    assert got["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    invalid = ConfigResource(
        ConfigResource.Type.TOPIC, "adm-alter", set_config={"segment.ms": "-5"}
    )
    with pytest.raises(ck.KafkaException) as e:
        admin.alter_configs([invalid])[invalid].result(TIMEOUT)
    assert e.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    assert _configs(admin, "adm-alter")["segment.ms"].value == "1000"


def test_delete_then_recreate_gives_a_new_empty_topic(
    admin: AdminClient, module_broker: BrokerProcess
) -> None:
    admin.create_topics([NewTopic("adm-del", 2, 1, config={"retention.ms": "3600000"})])[
        "adm-del"
    ].result(TIMEOUT)
    first_id = _topic_id(admin, "adm-del")
    p = ck.Producer({"bootstrap.servers": module_broker.bootstrap})
    for i in range(10):
        p.produce("adm-del", value=b"v%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0

    admin.delete_topics(["adm-del"])["adm-del"].result(TIMEOUT)
    assert "adm-del" not in admin.list_topics(timeout=TIMEOUT).topics
    wait_until(
        lambda: not any(module_broker.log_dir.glob("adm-del-[0-9]*")),
        TIMEOUT,
        what="partition directories of the deleted topic to go",
    )
    with pytest.raises(ck.KafkaException) as e:
        admin.delete_topics(["adm-del"])["adm-del"].result(TIMEOUT)
    assert e.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART

    admin.create_topics([NewTopic("adm-del", 1, 1)])["adm-del"].result(TIMEOUT)
    assert _topic_id(admin, "adm-del") != first_id
    got = _configs(admin, "adm-del")
    assert got["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    c = ck.Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "adm"})
    try:
        low, high = c.get_watermark_offsets(ck.TopicPartition("adm-del", 0), timeout=TIMEOUT)
    finally:
        c.close()
    assert (low, high) == (0, 0)
