"""The manager's settings come from the broker's key table: same defaults, every key read."""

from __future__ import annotations

import dataclasses

import pytest

from tierlog.config import load_broker_config
from tierlog.config.broker_keys import BROKER_KEYS
from tierlog.config.definitions import LONG_MAX
from tierlog.tiered.manager import RemoteLogManagerConfig

KEYED = [f for f in dataclasses.fields(RemoteLogManagerConfig) if "broker_key" in f.metadata]


def _other_value(key: str) -> str:
    """A valid value of ``key`` that is not its default."""
    default = BROKER_KEYS[key].default
    if isinstance(default, float):
        return "0.3"
    if default >= LONG_MAX // 2:
        return "1000"
    return str(default + 7) if default >= 0 else "7"


def test_defaults_are_the_broker_key_defaults() -> None:
    assert RemoteLogManagerConfig.from_broker_config(load_broker_config({})) == (
        RemoteLogManagerConfig()
    )
    for f in KEYED:
        value = getattr(RemoteLogManagerConfig(), f.name)
        assert value == type(value)(BROKER_KEYS[f.metadata["broker_key"]].default), f.name


@pytest.mark.parametrize("f", KEYED, ids=lambda f: f.name)
def test_each_broker_key_reaches_its_field(f: dataclasses.Field[object]) -> None:
    key = f.metadata["broker_key"]
    broker = load_broker_config({key: _other_value(key)})
    cfg = RemoteLogManagerConfig.from_broker_config(broker)
    assert getattr(cfg, f.name) == broker.get(key) != BROKER_KEYS[key].default
    assert type(getattr(cfg, f.name)) is type(getattr(RemoteLogManagerConfig(), f.name))


def test_kafka_names_of_the_copy_lag_keys() -> None:
    broker = load_broker_config(
        {"log.remote.copy.lag.ms": "5000", "log.remote.copy.lag.bytes": "-1"}
    )
    cfg = RemoteLogManagerConfig.from_broker_config(broker)
    assert (cfg.copy_lag_ms, cfg.copy_lag_bytes) == (5000, -1)


def test_node_id_is_the_broker_id() -> None:
    cfg = RemoteLogManagerConfig.from_broker_config(load_broker_config({"node.id": "4"}))
    assert cfg.broker_id == 4
