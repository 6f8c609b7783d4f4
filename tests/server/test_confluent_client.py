"""confluent-kafka (librdkafka 2.16) against a real broker: produce/consume and admin."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from tests.helpers.broker import BrokerProcess
from tests.helpers.confluent import consume_assigned
from tests.helpers.poll import wait_until


def _admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _create(b: BrokerProcess, name: str, partitions: int = 1, **configs: str) -> None:
    admin = _admin(b)  # must outlive the futures: destroying it cancels them
    fs = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])
    fs[name].result(30)


def test_produce_then_consume_with_assign(module_broker: BrokerProcess) -> None:
    _create(module_broker, "cf-assign", 2)
    p = ck.Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(500):
        p.produce("cf-assign", key=b"k%d" % i, value=b"value-%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    for part in (0, 1):
        msgs = consume_assigned(module_broker.bootstrap, "cf-assign", part, 250)
        assert [m.value() for m in msgs] == [b"value-%d" % i for i in range(part, 500, 2)]
        assert [m.offset() for m in msgs] == list(range(250))


def test_idempotent_producer_and_compression(module_broker: BrokerProcess) -> None:
    _create(module_broker, "cf-idem")
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = ck.Producer(
            {
                "bootstrap.servers": module_broker.bootstrap,
                "enable.idempotence": True,
                "compression.type": codec,
                "linger.ms": 2,
            }
        )
        for i in range(100):
            p.produce("cf-idem", value=f"{codec}-{i}".encode(), partition=0)
        assert p.flush(30) == 0, codec
    msgs = consume_assigned(module_broker.bootstrap, "cf-idem", 0, 500)
    assert len(msgs) == 500
    assert msgs[-1].value() == b"zstd-99"


def test_long_poll_wakes_on_append(module_broker: BrokerProcess) -> None:
    _create(module_broker, "cf-longpoll")
    c = ck.Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": "lp",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5000,
        }
    )
    try:
        c.assign([ck.TopicPartition("cf-longpoll", 0, ck.OFFSET_BEGINNING)])
        assert c.poll(0.5) is None  # nothing there yet; the fetch is now waiting
        p = ck.Producer({"bootstrap.servers": module_broker.bootstrap})
        sent = time.monotonic()
        p.produce("cf-longpoll", value=b"wake", partition=0)
        assert p.flush(10) == 0
        m = wait_until(lambda: c.poll(0.2), 10, what="message")
        # woken by the append, not by the 5 s max wait expiring
        assert m.value() == b"wake"
        assert time.monotonic() - sent < 4
    finally:
        c.close()


def test_admin_create_describe_alter_delete(module_broker: BrokerProcess) -> None:
    admin = _admin(module_broker)
    _create(module_broker, "cf-admin", 3, **{"retention.ms": "3600000", "segment.bytes": "1048576"})
    md = admin.list_topics(timeout=10)
    assert len(md.topics["cf-admin"].partitions) == 3

    res = ConfigResource(ConfigResource.Type.TOPIC, "cf-admin")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    inc = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cf-admin",
        incremental_configs=[
            ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([inc])[inc].result(10)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.bytes"].value == "1000000"
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    admin.create_partitions([NewPartitions("cf-admin", 5)])["cf-admin"].result(10)
    assert len(admin.list_topics(timeout=10).topics["cf-admin"].partitions) == 5

    admin.delete_topics(["cf-admin"])["cf-admin"].result(10)
    assert "cf-admin" not in admin.list_topics(timeout=10).topics


def test_admin_rejects_invalid_topics_and_configs(module_broker: BrokerProcess) -> None:
    admin = _admin(module_broker)
    cases = {
        "bad/name": {},
        "cf-bad-policy": {"cleanup.policy": "shrink"},
        "cf-unknown-key": {"no.such.key": "1"},
        "cf-local-gt-total": {"retention.ms": "1000", "local.retention.ms": "2000"},
    }
    fs = admin.create_topics([NewTopic(n, 1, 1, config=c) for n, c in cases.items()])
    errors: dict[str, ck.KafkaError] = {}
    for name, f in fs.items():
        with pytest.raises(ck.KafkaException) as e:
            f.result(10)
        errors[name] = e.value.args[0]
    assert errors["bad/name"].code() == ck.KafkaError.TOPIC_EXCEPTION
    for name in ("cf-bad-policy", "cf-unknown-key", "cf-local-gt-total"):
        assert errors[name].code() == ck.KafkaError.INVALID_CONFIG, name
    assert "cleanup.policy" in errors["cf-bad-policy"].str()
    assert "no.such.key" in errors["cf-unknown-key"].str()
    assert "cf-bad-policy" not in admin.list_topics(timeout=10).topics
