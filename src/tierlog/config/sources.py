"""Where a config value comes from (KIP-226's ``config_source``), and Kafka's broker synonyms.

A broker value is looked up in this order, the first level that has it winning:
``/config/brokers/<id>`` (DYNAMIC_BROKER_CONFIG), ``/config/brokers/<default>``
(DYNAMIC_DEFAULT_BROKER_CONFIG), ``server.properties`` (STATIC_BROKER_CONFIG), then the key's
default (DEFAULT_CONFIG). A topic override (DYNAMIC_TOPIC_CONFIG) comes before all of them.
"""

from __future__ import annotations

import enum


class ConfigSource(enum.IntEnum):
    """DescribeConfigs ``config_source`` wire values (KIP-226)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_key_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys that set the same value as ``name``, highest priority first (Kafka's
    ``brokerConfigSynonyms``): the unit variants of the roll and retention times, and the
    scheduler interval that stands in for an unset ``log.flush.interval.ms``."""
    if name == "log.flush.interval.ms":
        return (name, "log.flush.scheduler.interval.ms")
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)
