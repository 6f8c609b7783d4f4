"""Broker keys of a Kafka 3.x (ZooKeeper mode) server.properties: each takes Kafka's default and
a typical value, an invalid value names its key, and the ones tierlog honours reach the part
that applies them (log config, group coordinator, connection limits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from tests.helpers.broker import serve_to_exit
from tests.helpers.config import assert_refused_naming
from tierlog.config import ConfigError, effective_topic_config, load_broker_config
from tierlog.config.connection_quotas import parse_connection_overrides
from tierlog.config.definitions import INT_MAX, LONG_MAX
from tierlog.config.kafka_versions import kafka_version_problem
from tierlog.server.connection_limits import ConnectionLimits, canonical_ip, resolve_overrides
from tierlog.server.groups_wiring import group_coordinator_config
from tierlog.server.log_configs import log_config_for

#: key -> (Kafka 3.7's default, a value an operator typically writes, that value parsed)
KAFKA_KEYS: dict[str, tuple[Any, str, Any]] = {
    "queued.max.requests": (500, "1000", 1000),
    "queued.max.request.bytes": (-1, "104857600", 104857600),
    "background.threads": (10, "20", 20),
    "max.connections": (INT_MAX, "10000", 10000),
    "max.connections.per.ip": (INT_MAX, "500", 500),
    "max.connections.per.ip.overrides": (
        "",
        "kafka-1:100,127.0.0.1:200",
        "kafka-1:100,127.0.0.1:200",
    ),
    "replica.socket.timeout.ms": (30000, "60000", 60000),
    "replica.socket.receive.buffer.bytes": (65536, "131072", 131072),
    "replica.high.watermark.checkpoint.interval.ms": (5000, "10000", 10000),
    "producer.purgatory.purge.interval.requests": (1000, "100", 100),
    "fetch.purgatory.purge.interval.requests": (1000, "100", 100),
    "delete.records.purgatory.purge.interval.requests": (1, "10", 10),
    "reserved.broker.max.id": (1000, "2000", 2000),
    "broker.id.generation.enable": (True, "false", False),
    "inter.broker.protocol.version": ("3.7-IV4", "3.6", "3.6"),
    "log.message.format.version": ("3.0-IV1", "2.8", "2.8"),
    "log.message.timestamp.difference.max.ms": (LONG_MAX, "3600000", 3600000),
    "metric.reporters": ([], "", []),
    "metrics.num.samples": (2, "3", 3),
    "metrics.sample.window.ms": (30000, "60000", 60000),
    "metrics.recording.level": ("INFO", "DEBUG", "DEBUG"),
    "zookeeper.set.acl": (False, "false", False),
    "zookeeper.max.in.flight.requests": (10, "100", 100),
    "num.replica.alter.log.dirs.threads": (None, "4", 4),
    "log.flush.scheduler.interval.ms": (LONG_MAX, "3000", 3000),
    "log.flush.offset.checkpoint.interval.ms": (60000, "30000", 30000),
    "log.flush.start.offset.checkpoint.interval.ms": (60000, "30000", 30000),
    "log.dir.failure.timeout.ms": (30000, "60000", 60000),
    "auto.include.jmx.reporter": (True, "false", False),
    "kafka.metrics.reporters": ([], "", []),
    "kafka.metrics.polling.interval.secs": (10, "30", 30),
    "create.topic.policy.class.name": (None, "", ""),
    "alter.config.policy.class.name": (None, "", ""),
    "client.quota.callback.class": (None, "", ""),
    "replica.selector.class": (None, "", ""),
    "password.encoder.secret": (None, "s3cret", "s3cret"),
    "socket.listen.backlog.size": (512, "50", 50),
    "request.timeout.ms": (30000, "40000", 40000),
    "controller.socket.timeout.ms": (30000, "40000", 40000),
    "max.connection.creation.rate": (INT_MAX, "100", 100),
    "quota.window.num": (11, "11", 11),
    "quota.window.size.seconds": (1, "2", 2),
    "log.message.downconversion.enable": (True, "false", False),
    "log.cleaner.io.buffer.size": (524288, "1048576", 1048576),
    "group.max.size": (INT_MAX, "100", 100),
    "offset.metadata.max.bytes": (4096, "1024", 1024),
    "producer.id.expiration.ms": (86400000, "3600000", 3600000),
}


@pytest.mark.parametrize("key", sorted(KAFKA_KEYS))
def test_kafka_key_default_and_typical_value(key: str) -> None:
    default, text, parsed = KAFKA_KEYS[key]
    assert load_broker_config({}).get(key) == default
    cfg = load_broker_config({key: text})
    assert cfg.get(key) == parsed
    assert key in cfg.explicit


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"queued.max.requests": "0"}, "queued.max.requests"),
        ({"queued.max.request.bytes": "lots"}, "queued.max.request.bytes"),
        ({"background.threads": "0"}, "background.threads"),
        ({"socket.listen.backlog.size": "0"}, "socket.listen.backlog.size"),
        ({"max.connections": "-1"}, "max.connections"),
        ({"max.connections.per.ip": "-1"}, "max.connections.per.ip"),
        ({"max.connections.per.ip.overrides": "host"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "h:many"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "h:-1"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": ":5"}, "max.connections.per.ip.overrides"),
        ({"replica.socket.timeout.ms": "30s"}, "replica.socket.timeout.ms"),
        ({"reserved.broker.max.id": "-1"}, "reserved.broker.max.id"),
        ({"broker.id.generation.enable": "yes"}, "broker.id.generation.enable"),
        ({"inter.broker.protocol.version": "latest"}, "inter.broker.protocol.version"),
        ({"inter.broker.protocol.version": "3.6-IV9"}, "inter.broker.protocol.version"),
        ({"inter.broker.protocol.version": "4.0"}, "inter.broker.protocol.version"),
        ({"log.message.format.version": "v2"}, "log.message.format.version"),
        (
            {"log.message.timestamp.difference.max.ms": "-1"},
            "log.message.timestamp.difference.max.ms",
        ),
        ({"metrics.num.samples": "0"}, "metrics.num.samples"),
        ({"metrics.sample.window.ms": "0"}, "metrics.sample.window.ms"),
        ({"metrics.recording.level": "VERBOSE"}, "metrics.recording.level"),
        ({"zookeeper.set.acl": "true"}, "zookeeper.set.acl"),
        ({"zookeeper.max.in.flight.requests": "0"}, "zookeeper.max.in.flight.requests"),
        ({"num.replica.alter.log.dirs.threads": "x"}, "num.replica.alter.log.dirs.threads"),
        ({"log.dir.failure.timeout.ms": "0"}, "log.dir.failure.timeout.ms"),
        ({"kafka.metrics.polling.interval.secs": "0"}, "kafka.metrics.polling.interval.secs"),
        ({"max.connection.creation.rate": "-1"}, "max.connection.creation.rate"),
        ({"group.max.size": "0"}, "group.max.size"),
        ({"producer.id.expiration.ms": "0"}, "producer.id.expiration.ms"),
        ({"log.cleaner.io.buffer.size": "-1"}, "log.cleaner.io.buffer.size"),
        ({"auto.include.jmx.reporter": "1"}, "auto.include.jmx.reporter"),
    ],
)
def test_invalid_kafka_key_names_the_key(raw: dict[str, str], key: str) -> None:
    assert_refused_naming(raw, key)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("metric.reporters", "com.example.Reporter"),
        ("metric.reporters", "org.apache.kafka.common.metrics.JmxReporter,com.example.Reporter"),
        ("kafka.metrics.reporters", "com.example.Reporter,com.example.Other"),
        ("create.topic.policy.class.name", "com.example.NoShortTopicsPolicy"),
        ("alter.config.policy.class.name", "com.example.AlterPolicy"),
        ("client.quota.callback.class", "com.example.QuotaCallback"),
        ("replica.selector.class", "org.apache.kafka.common.replica.RackAwareReplicaSelector"),
    ],
)
def test_a_java_class_is_a_startup_error(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_broker_config({key: value})
    assert e.value.key == key
    assert "cannot load Java classes" in str(e.value)
    first_plugin = next(n for n in value.split(",") if not n.endswith(".JmxReporter"))
    assert first_plugin in str(e.value)


def test_kafkas_own_jmx_reporter_is_accepted() -> None:
    """Kafka's JmxReporter is how Kafka exports metrics, not a plugin; tierlog's metrics go
    to Prometheus, so a server.properties that names it still starts."""
    cfg = load_broker_config({"metric.reporters": "org.apache.kafka.common.metrics.JmxReporter"})
    assert cfg.values["metric.reporters"] == ["org.apache.kafka.common.metrics.JmxReporter"]


@pytest.mark.parametrize(
    "version",
    [
        "3.7",
        "3.7-IV4",
        "3.6-IV2",
        "3.9",
        "2.8",
        "2.8-IV1",
        "1.0",
        "1.0.1",
        "0.10.2-IV0",
        "0.10.0.1",
        "0.8.2",
    ],
)
def test_kafka_version_strings_are_accepted(version: str) -> None:
    """Both keys at the same version: an older protocol alone is refused, as Kafka refuses
    it, when the default message format (3.0) is newer than it."""
    assert kafka_version_problem(version) is None
    cfg = load_broker_config(
        {"inter.broker.protocol.version": version, "log.message.format.version": version}
    )
    assert cfg.get("inter.broker.protocol.version") == version
    assert cfg.get("log.message.format.version") == version


@pytest.mark.parametrize("version", ["", "3", "3.10", "3.6-IV3", "0.10", "10.0", "3.6_IV2", "v3.6"])
def test_garbage_versions_are_refused(version: str) -> None:
    assert kafka_version_problem(version) is not None


def test_broker_id_over_reserved_max_needs_generation_off() -> None:
    with pytest.raises(ConfigError) as e:
        load_broker_config({"broker.id": "1001"})
    assert e.value.key == "broker.id"
    assert "reserved.broker.max.id" in str(e.value)
    assert (
        load_broker_config({"broker.id": "1001", "reserved.broker.max.id": "1001"}).node_id == 1001
    )
    off = load_broker_config({"broker.id": "5000", "broker.id.generation.enable": "false"})
    assert off.node_id == 5000


def _bounds(broker: dict[str, str], topic: dict[str, Any]) -> tuple[int, int]:
    log = log_config_for(topic, load_broker_config(broker))
    return log.message_timestamp_before_max_ms, log.message_timestamp_after_max_ms


def test_timestamp_difference_fills_bounds_left_at_default() -> None:
    """Kafka 3.6+ (KIP-937): the deprecated difference applies to a before/after bound only
    where that bound keeps its default; the broker's difference is resolved before the
    topic's, so it wins for a topic that sets no bound of its own."""
    assert _bounds({}, {}) == (LONG_MAX, LONG_MAX)
    assert _bounds({"log.message.timestamp.difference.max.ms": "1000"}, {}) == (1000, 1000)
    assert _bounds(
        {
            "log.message.timestamp.difference.max.ms": "1000",
            "log.message.timestamp.after.max.ms": "5",
        },
        {},
    ) == (1000, 5)
    assert _bounds({}, {"message.timestamp.difference.max.ms": 2000}) == (2000, 2000)
    assert _bounds(
        {"log.message.timestamp.difference.max.ms": "1000"},
        {"message.timestamp.difference.max.ms": 2000},
    ) == (1000, 1000)
    assert _bounds(
        {"log.message.timestamp.difference.max.ms": "1000"},
        {"message.timestamp.before.max.ms": 7},
    ) == (7, 1000)
    assert _bounds(
        {"log.message.timestamp.before.max.ms": "9"},
        {"message.timestamp.difference.max.ms": 2000},
    ) == (9, 2000)


def test_topic_timestamp_difference_key() -> None:
    cfg = load_broker_config({"log.message.timestamp.difference.max.ms": "60000"})
    assert effective_topic_config({}, cfg)["message.timestamp.difference.max.ms"] == 60000


def test_honoured_keys_reach_their_owners() -> None:
    cfg = load_broker_config(
        {
            "producer.id.expiration.ms": "3600000",
            "group.max.size": "7",
            "offset.metadata.max.bytes": "128",
        }
    )
    assert log_config_for({}, cfg).producer_id_expiration_ms == 3_600_000
    groups = group_coordinator_config(cfg, 50)
    assert groups.max_size == 7
    assert groups.offset_metadata_max_bytes == 128
    assert log_config_for({}, load_broker_config({})).producer_id_expiration_ms == 86_400_000


def test_connection_overrides_parse_like_kafka() -> None:
    assert parse_connection_overrides("") == {}
    assert parse_connection_overrides("hostName:100, 127.0.0.1:200") == {
        "hostName": 100,
        "127.0.0.1": 200,
    }
    assert parse_connection_overrides("::1:5") == {"::1": 5}


def _refused() -> Counter:
    return Counter("refused", "test", ["reason"], registry=CollectorRegistry())


def _count(counter: Counter, reason: str) -> float:
    return float(counter.labels(reason)._value.get())


def _limits(
    refused: Counter,
    overrides: dict[str, int] | None = None,
    creation_rate: int = INT_MAX,
    window: tuple[int, int] = (11, 1000),
) -> ConnectionLimits:
    held = Counter("held", "test", registry=CollectorRegistry())
    return ConnectionLimits((3, 2, overrides or {}, creation_rate), window, refused, held)


def test_connection_limits_count_per_ip_and_in_total() -> None:
    refused = _refused()
    limits = _limits(refused, {"10.0.0.9": 0, "10.0.0.8": 5})
    assert limits.admit("10.0.0.1") and limits.admit("::ffff:10.0.0.1")
    assert not limits.admit("10.0.0.1")
    assert _count(refused, "max_connections_per_ip") == 1
    assert not limits.admit("10.0.0.9")
    assert limits.admit("10.0.0.8")
    assert not limits.admit("10.0.0.8")
    assert _count(refused, "max_connections") == 1
    limits.release("10.0.0.1")
    assert limits.total == 2
    assert limits.admit("10.0.0.1")
    assert _count(refused, "max_connections_per_ip") == 2


def test_broker_wide_creation_rate_holds_connections_as_kafkas_blocked_acceptor() -> None:
    """KIP-612's max.connection.creation.rate: with two 1 s windows (a rate over at least
    one second) and a bound of 2 per second, two connections at once are accepted at once;
    the third takes the rate to 3/s and is held (3 - 2) / 2 * 1 s; one arriving meanwhile
    waits for the acceptor to be free first and is held longer still. Connections spread
    out below the rate are never held; unlimited (the default) never holds."""
    limits = _limits(_refused(), creation_rate=2, window=(2, 1000))
    assert limits.accept_delay_ms(10_000) == 0
    assert limits.accept_delay_ms(10_000) == 0
    assert limits.accept_delay_ms(10_000) == 500
    fourth = limits.accept_delay_ms(10_100)
    assert fourth is not None and fourth > 400, "queued behind the third, then throttled"
    spread = _limits(_refused(), creation_rate=2, window=(2, 1000))
    assert all(spread.accept_delay_ms(1_500 * i) == 0 for i in range(10))
    unlimited = _limits(_refused())
    assert all(unlimited.accept_delay_ms(0) == 0 for _ in range(1000))


def test_a_creation_rate_of_zero_refuses_every_new_connection() -> None:
    refused = _refused()
    limits = _limits(refused, creation_rate=0)
    assert limits.accept_delay_ms(0) is None
    assert _count(refused, "max_connection_creation_rate") == 1


def test_override_host_names_resolve_at_start() -> None:
    resolved = resolve_overrides({"localhost": 3, "::1": 4})
    assert resolved["127.0.0.1"] == 3
    assert resolved["::1"] in (3, 4)
    assert canonical_ip("::FFFF:127.0.0.1") == "127.0.0.1"
    with pytest.raises(ConfigError) as e:
        resolve_overrides({"no-such-host.invalid": 1})
    assert e.value.key == "max.connections.per.ip.overrides"


def test_serve_stops_on_an_unresolvable_override_host(tmp_path: Path) -> None:
    out = serve_to_exit(tmp_path, {"max.connections.per.ip.overrides": "no-such-host.invalid:3"})
    assert out.returncode == 2
    assert "max.connections.per.ip.overrides" in out.stderr
    assert "no-such-host.invalid" in out.stderr
