"""Topic config (config.topic): DescribeConfigs sources and synonyms, validation naming the key,
the tiered-topic rules of spec/kafka-tiered-storage.md §5.8."""

from __future__ import annotations

import re

import pytest

from tierlog.config import (
    ConfigError,
    ConfigSource,
    describe_topic_config,
    effective_topic_config,
    load_broker_config,
    parse_topic_overrides,
    validate_topic_config,
)
from tierlog.server.log_configs import log_config_for


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
        ({"message.format.version": "0.11.0-bogus"}, "message.format.version"),
        ({"message.format.version": "4.0"}, "message.format.version"),
        ({"message.downconversion.enable": "maybe"}, "message.downconversion.enable"),
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


def test_deprecated_record_format_topic_keys_are_accepted_and_described() -> None:
    """``message.format.version`` and ``message.downconversion.enable``, which topics created
    by older Kafka tooling carry, are accepted (no effect: tierlog writes and serves record
    format v2 only) and described with their broker synonyms."""
    cfg = load_broker_config({"log.message.format.version": "2.8"})
    overrides = parse_topic_overrides({"message.downconversion.enable": "false"})
    validate_topic_config(overrides, cfg)
    entries = {e.name: e for e in describe_topic_config(overrides, cfg, include_synonyms=True)}
    fmt = entries["message.format.version"]
    assert (fmt.value, fmt.source) == ("2.8", ConfigSource.STATIC_BROKER_CONFIG)
    assert fmt.synonyms[-1].name == "log.message.format.version"
    down = entries["message.downconversion.enable"]
    assert (down.value, down.source) == ("false", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    validate_topic_config(parse_topic_overrides({"message.format.version": "3.6-IV2"}), cfg)
