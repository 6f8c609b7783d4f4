"""Building the log engine's ``LogConfig`` from a topic's effective Kafka config.

This is the only place that knows both the Kafka key names and the log's typed fields; the
mapping is by name (``segment.bytes`` -> ``segment_bytes``) so a new key on both sides needs
no code here, and a key the log does not model is simply not passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from tierlog.config.broker import BrokerConfig
from tierlog.config.topic import effective_topic_config
from tierlog.log.config import LogConfig

_LOG_FIELDS = {f.name for f in fields(LogConfig)}


def log_config_from_effective(effective: Mapping[str, Any]) -> LogConfig:
    kw: dict[str, Any] = {}
    for key, value in effective.items():
        name = key.replace(".", "_")
        if name not in _LOG_FIELDS:
            continue
        kw[name] = tuple(value) if isinstance(value, list) else value
    return LogConfig(**kw)


def log_config_for(
    overrides: Mapping[str, Any], broker: BrokerConfig, *, internal: bool = False
) -> LogConfig:
    """The LogConfig of a topic with these parsed overrides on this broker.

    Internal topics never tier (spec §1.1), whatever their config says. The producer-state
    expiry is a broker key with no topic counterpart, so it is added here.
    """
    eff = effective_topic_config(overrides, broker)
    if internal:
        eff["remote.storage.enable"] = False
    eff["producer.id.expiration.ms"] = broker.get("producer.id.expiration.ms")
    return log_config_from_effective(eff)
