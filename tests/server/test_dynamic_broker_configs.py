"""Dynamic broker configs on one real broker (``tierlog serve``), through real admin clients:
confluent-kafka's ``incremental_alter_configs`` and kafka-python's ``alter_configs`` on BROKER
resources, DescribeConfigs' sources and synonyms, the live effect on topics without an
override and on connection limits, the file that keeps them across a restart, and Kafka's
refusals."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import KafkaAdminClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.wire import connection_closed, raw_connection
from tierlog.client import WireConnection
from tierlog.config.definitions import ConfigError
from tierlog.config.dynamic_broker import live_keys
from tierlog.config.sources import ConfigSource
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.server.dynamic_wiring import APPLIED_KEYS, check_cleaner_threads

SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND


def _incremental(
    admin: AdminClient,
    name: str,
    entries: list[tuple[str, str | None, AlterConfigOpType]],
    *,
    validate_only: bool = False,
) -> None:
    res = ConfigResource(
        ConfigResource.Type.BROKER,
        name,
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
    )
    admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(30)


def _incremental_wire(
    b: BrokerProcess, name: str, entries: list[tuple[str, str | None, AlterConfigOpType]]
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs over the wire: librdkafka refuses a resource named ``""``,
    the name of the cluster-wide default (``kafka-configs.sh --entity-default``)."""
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                {
                    "resource_type": 4,
                    "resource_name": name,
                    "configs": [
                        {"name": k, "config_operation": int(op.value), "value": v}
                        for k, v, op in entries
                    ],
                }
            ],
            validate_only=False,
        )
    res = r.responses[0]
    return int(res.error_code), res.error_message


def _describe(b: BrokerProcess, resource_type: int, name: str, keys: list[str] | None) -> list[Any]:
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
            ],
            include_synonyms=True,
            include_documentation=False,
        )
    res = r.results[0]
    assert int(res.error_code) == 0, res.error_message
    return list(res.configs)


def _entry(b: BrokerProcess, resource_type: int, name: str, key: str) -> Any:
    return next(e for e in _describe(b, resource_type, name, [key]) if e.name == key)


def _synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, int(s.source)) for s in entry.synonyms]


def _refusal(admin: AdminClient, name: str, key: str, value: str) -> tuple[int, str]:
    with pytest.raises(KafkaException) as info:
        _incremental(admin, name, [(key, value, SET)])
    err = info.value.args[0]
    return int(err.code()), str(err.str())


def test_incremental_alter_sets_default_and_broker_values_with_kafka_sources(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory({"log.retention.hours": "100"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)

    assert _incremental_wire(b, "", [("log.retention.ms", "7000000", SET)]) == (0, None)
    _incremental(admin, "0", [("log.retention.ms", "9000000", SET)])

    entry = _entry(b, 4, "0", "log.retention.ms")
    assert entry.value == "9000000"
    assert int(entry.config_source) == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert entry.read_only is False
    assert _synonyms(entry) == [
        ("log.retention.ms", "9000000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "7000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "100", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    default_resource = _describe(b, 4, "", None)
    assert [(e.name, e.value, int(e.config_source)) for e in default_resource] == [
        ("log.retention.ms", "7000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
    topic_entry = _entry(b, 2, "plain", "retention.ms")
    assert topic_entry.value == "9000000"
    assert int(topic_entry.config_source) == ConfigSource.DYNAMIC_BROKER_CONFIG

    _incremental(admin, "0", [("log.retention.ms", None, DELETE)])
    assert _entry(b, 2, "plain", "retention.ms").value == "7000000"
    static = _entry(b, 4, "0", "log.cleaner.threads")
    assert int(static.config_source) == ConfigSource.DEFAULT_CONFIG
    assert _entry(b, 4, "0", "log.dirs").read_only is True


def test_kafka_python_alter_configs_replaces_the_broker_set(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)

    def alter(configs: dict[str, str]) -> object:
        resource = KpConfigResource(KpConfigResourceType.BROKER, "0", configs)
        # AlterConfigs (API 33); kafka-python first checks the keys are dynamic (not
        # read-only) in this broker's DescribeConfigs
        return admin.alter_configs([resource], incremental=False)

    try:
        ok = {"broker": {"0": "OK"}}
        assert alter({"log.segment.bytes": "2000000", "message.max.bytes": "500000"}) == ok
        assert _entry(b, 4, "0", "message.max.bytes").value == "500000"
        # kafka-python adds back the other modified keys; AlterConfigs itself replaces
        assert alter({"log.segment.bytes": "3000000"}) == ok
    finally:
        admin.close()
    segment = _entry(b, 4, "0", "log.segment.bytes")
    assert (segment.value, int(segment.config_source)) == (
        "3000000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.ALTER_CONFIGS,
            2,
            resources=[
                {
                    "resource_type": 4,
                    "resource_name": "0",
                    "configs": [{"name": "log.segment.bytes", "value": "4000000"}],
                }
            ],
            validate_only=False,
        )
    assert int(r.responses[0].error_code) == 0
    message_max = _entry(b, 4, "0", "message.max.bytes")
    assert int(message_max.config_source) == ConfigSource.DEFAULT_CONFIG
    assert _entry(b, 4, "0", "log.segment.bytes").value == "4000000"


def test_dynamic_configs_survive_a_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert _incremental_wire(b, "", [("log.cleanup.policy", "compact", SET)]) == (0, None)
    _incremental(admin, "0", [("log.cleanup.policy", "delete", APPEND)])
    stored = json.loads((b.log_dir / "__tierlog_broker_configs.json").read_text())
    assert stored["brokers"]["<default>"]["config"] == {"log.cleanup.policy": "compact"}
    assert stored["brokers"]["0"]["config"] == {"log.cleanup.policy": "delete"}

    b.restart(kill=True)
    entry = _entry(b, 4, "0", "log.cleanup.policy")
    assert entry.value == "delete"
    assert _synonyms(entry)[:2] == [
        ("log.cleanup.policy", "delete", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.cleanup.policy", "compact", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]


def test_max_connections_per_ip_lowered_live_refuses_the_next_connection(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.list_topics(timeout=30)  # the admin client's connections are open and counted
    first = raw_connection(b.host_port)
    try:
        _incremental(admin, "0", [("max.connections.per.ip", "1", SET)])
        extra = raw_connection(b.host_port)
        assert connection_closed(extra)
        extra.close()
        assert b.metric("tierlog_connections_refused_total", reason="max_connections_per_ip") >= 1
    finally:
        first.close()


def test_refusals_name_the_keys_and_the_broker_keeps_serving(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    code, message = _refusal(admin, "0", "log.dirs", "/elsewhere")
    assert code == ErrorCode.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs)" in message
    code, wire_message = _incremental_wire(b, "", [("listeners", "PLAINTEXT://127.0.0.1:1", SET)])
    assert code == ErrorCode.INVALID_REQUEST
    assert wire_message is not None
    assert "Set(listeners)" in wire_message and "restart" in wire_message
    code, message = _refusal(admin, "0", "log.retention.ms", "soon")
    assert code == ErrorCode.INVALID_CONFIG and "log.retention.ms" in message
    code, message = _refusal(admin, "0", "log.retention.mss", "1")
    assert code == ErrorCode.INVALID_CONFIG and "Unknown config name: log.retention.mss" in message
    code, message = _refusal(admin, "0", "log.cleaner.threads", "5")
    assert code == ErrorCode.INVALID_CONFIG and "more than double" in message
    code, wire_message = _incremental_wire(b, "7", [("log.retention.ms", "1", SET)])
    assert code == ErrorCode.INVALID_REQUEST
    assert wire_message is not None and "Unexpected broker id" in wire_message
    with pytest.raises(KafkaException) as info:
        _incremental(admin, "0", [("log.retention.bytes", "5", APPEND)])
    assert int(info.value.args[0].code()) == ErrorCode.INVALID_CONFIG

    _incremental(admin, "0", [("log.retention.ms", "1234", SET)], validate_only=True)
    entry = _entry(b, 4, "0", "log.retention.ms")
    assert int(entry.config_source) == ConfigSource.DEFAULT_CONFIG
    assert not (b.log_dir / "__tierlog_broker_configs.json").exists()
    assert admin.list_topics(timeout=10).brokers


def test_every_live_key_is_applied_by_one_component() -> None:
    assert live_keys() == APPLIED_KEYS


@pytest.mark.parametrize(
    ("current", "new", "ok"), [(2, 4, True), (2, 5, False), (4, 1, False), (1, 0, False)]
)
def test_cleaner_threads_change_by_at_most_a_factor_of_two(
    current: int, new: int, ok: bool
) -> None:
    if ok:
        check_cleaner_threads(current, new)
    else:
        with pytest.raises(ConfigError, match=re.escape("log.cleaner.threads")):
            check_cleaner_threads(current, new)


def test_a_dynamic_only_key_is_described_once_set(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    key = "leader.replication.throttled.rate"
    assert key not in {e.name for e in _describe(b, 4, "0", None)}
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    _incremental(admin, "0", [(key, "1048576", SET)])
    entry = _entry(b, 4, "0", key)
    assert (entry.value, int(entry.config_source)) == (
        "1048576",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    code, message = _refusal(admin, "0", key, "-1")
    assert code == ErrorCode.INVALID_CONFIG and key in message


def _segments(b: BrokerProcess, partition_dir: str) -> int:
    return len(list((b.log_dir / partition_dir).glob("*.log")))


def test_a_lowered_log_segment_bytes_rolls_a_running_topics_segments(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """A topic without its own ``segment.bytes`` takes the new broker default at once: its
    next appends roll at the new size, with no restart and no topic change."""
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("rolling", 1, 1)])["rolling"].result(30)
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})

    def produce(n: int) -> None:
        for _ in range(n):
            producer.produce("rolling", b"x" * 2000, partition=0)
            assert producer.flush(10) == 0

    produce(5)
    assert _segments(b, "rolling-0") == 1
    _incremental(admin, "0", [("log.segment.bytes", "4096", SET)])
    produce(5)
    assert _segments(b, "rolling-0") >= 3


def test_log_cleaner_settings_changed_live_restart_its_threads(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """The cleaner's threads sleep ``log.cleaner.backoff.ms`` when nothing is dirty; set to
    ten minutes at start, a compacted topic filled afterwards stays dirty until the back-off
    is lowered live, which restarts the threads (Kafka's LogCleaner.reconfigure) and they
    clean it (the log shrinks to about one record per key)."""
    b = broker_factory({"log.cleaner.backoff.ms": "600000"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic = NewTopic("table", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": "1024"})
    admin.create_topics([topic])["table"].result(30)
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(60):
        producer.produce("table", key=b"k%d" % (i % 5), value=b"v" * 100, partition=0)
        assert producer.flush(10) == 0
    size = b.metric("tierlog_log_size_bytes", topic="table", partition="0")
    assert size > 6000  # 60 records of 100 bytes, nothing cleaned

    _incremental(admin, "0", [("log.cleaner.backoff.ms", "100", SET)])
    wait_until(
        lambda: b.metric("tierlog_log_size_bytes", topic="table", partition="0") < size / 2,
        30,
        what="the restarted cleaner compacted the log",
    )


def test_a_key_given_twice_is_refused(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    code, message = _incremental_wire(
        b, "0", [("log.retention.ms", "1000", SET), ("log.retention.ms", None, DELETE)]
    )
    assert code == ErrorCode.INVALID_REQUEST
    assert message is not None and "duplicate config keys: log.retention.ms" in message
    assert int(_entry(b, 4, "0", "log.retention.ms").config_source) == ConfigSource.DEFAULT_CONFIG
