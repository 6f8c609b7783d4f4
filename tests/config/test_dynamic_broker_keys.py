"""The dynamic broker keys: a requested set is checked with Kafka's answers (refused keys
named together, values parsed, text normalised), and the dynamic levels win in Kafka's order."""

from __future__ import annotations

import re

import pytest

from tests.helpers.config import assert_refused_naming
from tierlog.config.broker import load_broker_config
from tierlog.config.broker_keys import BROKER_KEYS
from tierlog.config.definitions import ConfigError, Dynamic
from tierlog.config.dynamic_broker import DynamicUpdateRefused, check_dynamic_set
from tierlog.config.sources import ConfigSource

STATIC = load_broker_config({"log.retention.hours": "24"})


def test_no_effect_keys_are_never_live() -> None:
    assert not [d.name for d in BROKER_KEYS.all() if d.no_effect and d.dynamic is Dynamic.LIVE]


def test_a_dynamic_set_is_normalised() -> None:
    assert check_dynamic_set({"log.cleanup.policy": " compact , delete "}, STATIC) == {
        "log.cleanup.policy": "compact,delete"
    }


@pytest.mark.parametrize(
    ("props", "words"),
    [
        (
            {"log.dirs": "/x", "node.id": "3"},
            "Cannot update these configs dynamically: Set(log.dirs, node.id)",
        ),
        ({"min.insync.replicas": "2"}, "reads them only when the broker starts"),
        ({"num.io.threads": "4"}, "no effect in tierlog"),
        ({"rsm.config.dir": "/x"}, "Set(rsm.config.dir)"),
    ],
)
def test_keys_that_cannot_change_live_are_refused_by_name(
    props: dict[str, str], words: str
) -> None:
    with pytest.raises(DynamicUpdateRefused) as info:
        check_dynamic_set(props, STATIC)
    assert words in str(info.value)


def test_unknown_keys_and_bad_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match=re.escape("Unknown config name: log.retention.mss")):
        check_dynamic_set({"log.retention.mss": "1"}, STATIC)
    with pytest.raises(ConfigError, match=re.escape("max.connections")):
        check_dynamic_set({"max.connections": "-1"}, STATIC)


def test_a_dynamic_value_wins_over_the_static_one_with_its_source() -> None:
    cfg = STATIC.with_dynamic({"log.retention.ms": "1000"}, {"message.max.bytes": "2000"})
    assert cfg.get("log.retention.ms") == 1000 and cfg.get("message.max.bytes") == 2000
    assert cfg.source("log.retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert cfg.source("message.max.bytes") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert cfg.source("log.retention.hours") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.with_dynamic({}, {}).get("message.max.bytes") == STATIC.get("message.max.bytes")


def test_cross_key_rules_hold_for_the_dynamic_result() -> None:
    with pytest.raises(ConfigError, match=re.escape("log.local.retention.ms")):
        STATIC.with_dynamic({"log.local.retention.ms": "999999999999"}, {})


def test_a_dynamic_only_key_is_refused_in_server_properties() -> None:
    assert_refused_naming(
        {"leader.replication.throttled.rate": "1000"}, "leader.replication.throttled.rate"
    )
    cfg = STATIC.with_dynamic({"leader.replication.throttled.rate": "1000"}, {})
    assert cfg.get("leader.replication.throttled.rate") == 1000
