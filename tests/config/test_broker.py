"""Broker config (config.broker): Kafka key names, defaults and synonyms, pass-through of plugin
keys; an invalid value names its key, at load and at ``tierlog serve`` start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.broker import serve_to_exit
from tests.helpers.config import assert_refused_naming
from tierlog.config import (
    broker_config_from_sources,
    effective_topic_config,
    load_broker_config,
)
from tierlog.server.log_configs import log_config_for


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"log.segmnt.bytes": "1"}, "log.segmnt.bytes"),
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"log.message.timestamp.type": "Whenever"}, "log.message.timestamp.type"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"listeners": "127.0.0.1:9092"}, "listeners"),
        ({"log.cleanup.policy": "shrink"}, "log.cleanup.policy"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio"),
        ({"log.retention.ms": "1000", "log.local.retention.ms": "2000"}, "log.local.retention.ms"),
        (
            {"log.retention.bytes": "10", "log.local.retention.bytes": "-1"},
            "log.local.retention.bytes",
        ),
        (
            {"remote.log.manager.copier.thread.pool.size": "0"},
            "remote.log.manager.copier.thread.pool.size",
        ),
        (
            {"rlmm.config.remote.log.metadata.topic.num.partitions": "x"},
            "rlmm.config.remote.log.metadata.topic.num.partitions",
        ),
        ({"remote.log.storage.manager.class.name": ""}, "remote.log.storage.manager.class.name"),
        (
            {"remote.log.metadata.manager.listener.name": "NOPE"},
            "remote.log.metadata.manager.listener.name",
        ),
        ({"connections.max.idle.ms": "0"}, "connections.max.idle.ms"),
        ({"connections.max.idle.ms": "-2"}, "connections.max.idle.ms"),
        ({"connections.max.idle.ms": "abc"}, "connections.max.idle.ms"),
    ],
)
def test_invalid_broker_config_names_the_key(raw: dict[str, str], key: str) -> None:
    assert_refused_naming(raw, key)


def test_broker_defaults_synonyms_and_passthrough(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("log.retention.hours=24\nrsm.config.bucket=b1\nlog.dirs=/x\n")
    cfg = broker_config_from_sources(props, ["log.segment.bytes=2048", "rlmm.config.foo=bar"])
    assert cfg.log_dirs == [Path("/x")]
    assert cfg.rsm_config == {"bucket": "b1"}
    assert cfg.rlmm_config == {"foo": "bar"}
    assert cfg.get("message.max.bytes") == 1048588
    assert cfg.fetch_max_bytes == 57_671_680  # Kafka's 55 MiB
    assert cfg.with_overrides({"fetch.max.bytes": "4096"}).fetch_max_bytes == 4096
    eff = effective_topic_config({}, cfg)
    assert eff["retention.ms"] == 24 * 3600 * 1000
    assert eff["segment.bytes"] == 2048
    assert eff["segment.ms"] == 7 * 24 * 3600 * 1000


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("log.retention.hourz=1", "log.retention.hourz"),
        ("connections.max.idle.ms=0", "connections.max.idle.ms"),
        ("connections.max.idle.ms=abc", "connections.max.idle.ms"),
    ],
)
def test_serve_refuses_unknown_key_or_invalid_value_at_startup(
    tmp_path: Path, override: str, key: str
) -> None:
    key_, _, value = override.partition("=")
    out = serve_to_exit(tmp_path, {key_: value})
    assert out.returncode == 2
    assert key in out.stderr


def test_connections_max_idle_ms_has_kafkas_default_and_minus_one_disables() -> None:
    assert load_broker_config({}).connections_max_idle_ms == 600_000
    assert load_broker_config({"connections.max.idle.ms": "-1"}).connections_max_idle_ms == -1
    assert load_broker_config({"connections.max.idle.ms": "1"}).connections_max_idle_ms == 1


def test_broker_default_policy_may_be_compact() -> None:
    cfg = load_broker_config({"log.cleanup.policy": "compact", "log.cleaner.threads": "2"})
    assert log_config_for({}, cfg).compacted
    assert cfg.get("log.cleaner.threads") == 2
