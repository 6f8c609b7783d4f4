"""Typed configuration with Kafka's key names, defaults and validation (stdlib only).

``BrokerConfig`` comes from ``server.properties`` plus overrides; topic configs are stored as
overrides and resolved against the broker's synonyms (see ``topic``).
"""

from tierlog.config.broker import (
    BrokerConfig,
    Endpoint,
    broker_config_from_sources,
    load_broker_config,
)
from tierlog.config.definitions import ConfigError
from tierlog.config.sources import ConfigSource
from tierlog.config.topic import (
    ConfigEntry,
    describe_topic_config,
    effective_topic_config,
    parse_topic_overrides,
    validate_topic_config,
)

__all__ = [
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "Endpoint",
    "broker_config_from_sources",
    "describe_topic_config",
    "effective_topic_config",
    "load_broker_config",
    "parse_topic_overrides",
    "validate_topic_config",
]
