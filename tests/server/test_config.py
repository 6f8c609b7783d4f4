"""Config: Kafka key names, defaults and validation; errors name the key; DescribeConfigs
sources; topic rules of spec/kafka-tiered-storage.md §5.8; LogConfig construction."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tierlog.config import (
    ConfigError,
    ConfigSource,
    broker_config_from_sources,
    describe_topic_config,
    effective_topic_config,
    load_broker_config,
    parse_topic_overrides,
    validate_topic_config,
)
from tierlog.config.properties import parse_properties
from tierlog.server.log_configs import log_config_for
from tierlog.server.operations_doc import render_operations_doc


def test_properties_parsing_basics() -> None:
    text = "# comment\n! also\nlog.dirs = /a,/b\nnum.partitions:3\nkey value with spaces\n"
    text += "multi=one\\\n    two\nesc=a\\tb\\u0041\n"
    assert parse_properties(text) == {
        "log.dirs": "/a,/b",
        "num.partitions": "3",
        "key": "value with spaces",
        "multi": "onetwo",
        "esc": "a\tbA",
    }


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
    ],
)
def test_invalid_broker_config_names_the_key(raw: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_broker_config(raw)
    assert e.value.key == key
    assert str(e.value).startswith(key)


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


def test_describe_sources_and_synonyms() -> None:
    cfg = load_broker_config({"log.retention.hours": "24"})
    overrides = parse_topic_overrides({"segment.bytes": "4096"})
    entries = {e.name: e for e in describe_topic_config(overrides, cfg, include_synonyms=True)}
    seg = entries["segment.bytes"]
    assert (seg.value, seg.source) == ("4096", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.source) for s in seg.synonyms] == [
        ("segment.bytes", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG),
    ]
    ret = entries["retention.ms"]
    assert (ret.value, ret.source) == ("86400000", ConfigSource.STATIC_BROKER_CONFIG)
    assert ret.synonyms[0].name == "log.retention.hours"
    assert ret.synonyms[0].value == "24"
    rb = entries["retention.bytes"]
    assert (rb.value, rb.source) == ("-1", ConfigSource.DEFAULT_CONFIG)
    assert entries["remote.storage.enable"].synonyms[-1].name == "remote.storage.enable"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"cleanup.policy": "shrink"}, "cleanup.policy"),
        ({"no.such": "1"}, "no.such"),
        ({"segment.bytes": "13"}, "segment.bytes"),
        ({"retention.ms": "1000", "local.retention.ms": "2000"}, "local.retention.ms"),
        ({"retention.ms": "1000", "local.retention.ms": "-1"}, "local.retention.ms"),
        ({"retention.bytes": "100", "local.retention.bytes": "200"}, "local.retention.bytes"),
        ({"min.cleanable.dirty.ratio": "2"}, "min.cleanable.dirty.ratio"),
    ],
)
def test_invalid_topic_config_names_the_key(overrides: dict[str, str], key: str) -> None:
    cfg = load_broker_config({})
    with pytest.raises(ConfigError) as e:
        validate_topic_config(parse_topic_overrides(overrides), cfg)
    assert e.value.key == key


def test_tiering_a_topic_needs_the_broker_switch() -> None:
    cfg = load_broker_config({"remote.log.storage.system.enable": "false"})
    with pytest.raises(ConfigError) as e:
        validate_topic_config(parse_topic_overrides({"remote.storage.enable": "true"}), cfg)
    assert e.value.key == "remote.storage.enable"
    assert "disabled in the broker" in e.value.message


def test_tiered_topic_rules_with_system_enabled() -> None:
    cfg = load_broker_config(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "directory",
        }
    )
    ok = parse_topic_overrides(
        {"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "500"}
    )
    validate_topic_config(ok, cfg)
    assert log_config_for(ok, cfg).remote_storage_enable
    assert not log_config_for(ok, cfg, internal=True).remote_storage_enable
    # copy disabled: local.* must be -2 or equal to the totals
    bad = parse_topic_overrides(
        {**{k: str(v) for k, v in ok.items()}, "remote.log.copy.disable": "true"}
    )
    with pytest.raises(ConfigError, match=re.escape("remote.log.copy.disable")):
        validate_topic_config(bad, cfg)
    # turning tiering off needs remote.log.delete.on.disable=true
    previous = effective_topic_config(ok, cfg)
    off = parse_topic_overrides({"remote.storage.enable": "false"})
    with pytest.raises(ConfigError) as e:
        validate_topic_config(off, cfg, previous)
    assert e.value.key == "remote.storage.enable"
    validate_topic_config(
        parse_topic_overrides(
            {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
        ),
        cfg,
        previous,
    )


def test_log_config_carries_effective_values() -> None:
    cfg = load_broker_config(
        {"log.segment.bytes": "4096", "log.message.timestamp.type": "LogAppendTime"}
    )
    lc = log_config_for(parse_topic_overrides({"retention.bytes": "100000"}), cfg)
    assert lc.segment_bytes == 4096
    assert lc.log_append_time
    assert lc.retention_bytes == 100000
    assert lc.cleanup_policy == ("delete",)


def test_serve_refuses_unknown_key_at_startup(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tierlog",
            "serve",
            "--override",
            "log.dirs=" + str(tmp_path),
            "--override",
            "log.retention.hourz=1",
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "log.retention.hourz" in out.stderr


def test_operations_doc_is_up_to_date() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    assert doc.read_text(encoding="utf-8") == render_operations_doc(), (
        "regenerate with: tierlog docs --output docs/operations.md"
    )


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
def test_compacted_topics_are_accepted_with_their_cleaner_settings(policy: str) -> None:
    cfg = load_broker_config({"log.cleaner.delete.retention.ms": "5000"})
    overrides = parse_topic_overrides(
        {
            "cleanup.policy": policy,
            "min.compaction.lag.ms": "10",
            "max.compaction.lag.ms": "20000",
            "min.cleanable.dirty.ratio": "0.25",
        }
    )
    validate_topic_config(overrides, cfg)
    log_cfg = log_config_for(overrides, cfg)
    assert log_cfg.compacted
    assert log_cfg.delete_enabled == ("delete" in policy)
    assert (log_cfg.min_compaction_lag_ms, log_cfg.max_compaction_lag_ms) == (10, 20000)
    assert log_cfg.min_cleanable_dirty_ratio == 0.25
    assert log_cfg.delete_retention_ms == 5000


def test_broker_default_policy_may_be_compact() -> None:
    cfg = load_broker_config({"log.cleanup.policy": "compact", "log.cleaner.threads": "2"})
    assert log_config_for({}, cfg).compacted
    assert cfg.get("log.cleaner.threads") == 2


def test_compacted_topic_cannot_be_tiered_with_kafkas_refusal() -> None:
    cfg = load_broker_config(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "directory",
        }
    )
    with pytest.raises(ConfigError) as e:
        validate_topic_config(
            parse_topic_overrides({"cleanup.policy": "compact", "remote.storage.enable": "true"}),
            cfg,
        )
    assert e.value.key == "cleanup.policy"
    assert e.value.message == "Remote log storage is unsupported for the compacted topics"
    validate_topic_config(parse_topic_overrides({"cleanup.policy": "compact"}), cfg)
