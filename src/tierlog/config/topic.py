"""Topic configuration: parsing overrides, Kafka's cross-key rules, effective values, sources.

A topic stores only its overrides (text, as given). Effective values are computed on demand
from the overrides and the broker's synonyms, so changing a broker default changes every
topic that did not override it, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierlog.config.broker import BrokerConfig
from tierlog.config.broker_keys import BROKER_KEYS
from tierlog.config.definitions import LONG_MAX, ConfigError, render
from tierlog.config.local_retention import check_local_retention
from tierlog.config.sources import ConfigSource
from tierlog.config.topic_keys import TOPIC_KEYS

#: Kafka's refusal of ``remote.storage.enable=true`` with ``cleanup.policy`` holding
#: ``compact``: tiered segments are immutable once uploaded, while the cleaner rewrites
#: segments in place (docs/operations.md, "Compacted topics").
COMPACTED_REMOTE_REFUSAL = "Remote log storage is unsupported for the compacted topics"


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    sensitive: bool
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...]
    doc: str
    type_name: str


def parse_topic_overrides(raw: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse text overrides; unknown keys and invalid values raise ``ConfigError``."""
    parsed: dict[str, Any] = {}
    for key, text in raw.items():
        definition = TOPIC_KEYS.get(key)
        if definition is None:
            raise ConfigError(key, "unknown topic config key")
        if text is None:
            continue
        parsed[key] = definition.parse(text)
    return parsed


def broker_default(key: str, broker: BrokerConfig) -> tuple[Any, ConfigSource, str | None]:
    """The value a topic gets for ``key`` without an override, and where it comes from."""
    definition = TOPIC_KEYS[key]
    found = broker.resolve_synonym(definition.synonyms)
    if found is None:
        return definition.default, ConfigSource.DEFAULT_CONFIG, None
    syn_key, value = found
    return value, broker.source(syn_key), syn_key


def effective_topic_config(overrides: Mapping[str, Any], broker: BrokerConfig) -> dict[str, Any]:
    """Every topic key's value for a topic with these (parsed) overrides."""
    out: dict[str, Any] = {}
    for definition in TOPIC_KEYS.all():
        if definition.name in overrides:
            out[definition.name] = overrides[definition.name]
        else:
            out[definition.name] = broker_default(definition.name, broker)[0]
    _apply_timestamp_difference(out, overrides, broker)
    return out


_TIMESTAMP_BOUNDS = (
    ("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms"),
    ("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms"),
)


def _apply_timestamp_difference(
    out: dict[str, Any], overrides: Mapping[str, Any], broker: BrokerConfig
) -> None:
    """The deprecated ``difference`` keys fill in a before/after bound left at its default.

    Kafka 3.6+ resolves this twice: the broker's default bound falls back to the broker's
    ``log.message.timestamp.difference.max.ms``, and the topic's bound, still unbounded after
    that, falls back to the topic's ``message.timestamp.difference.max.ms``. So a broker-level
    difference wins over a topic-level one for a topic that sets neither bound, exactly as
    Kafka applies them.
    """
    for topic_key, broker_key in _TIMESTAMP_BOUNDS:
        if topic_key not in overrides and broker.values[broker_key] == LONG_MAX:
            out[topic_key] = broker.values["log.message.timestamp.difference.max.ms"]
        if out[topic_key] == LONG_MAX:
            out[topic_key] = out["message.timestamp.difference.max.ms"]


def validate_topic_config(
    overrides: Mapping[str, Any],
    broker: BrokerConfig,
    previous: Mapping[str, Any] | None = None,
    *,
    internal: bool = False,
) -> None:
    """Kafka's cross-key rules on the effective config (spec/kafka-tiered-storage.md §5.8).

    ``previous`` holds the effective config before an alteration; it is needed for the rule
    that turning tiering off requires ``remote.log.delete.on.disable=true``.
    """
    eff = effective_topic_config(overrides, broker)
    remote = bool(eff["remote.storage.enable"]) and not internal
    if remote and not broker.remote_storage_system_enabled:
        raise ConfigError(
            "remote.storage.enable",
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage (set remote.log.storage.system.enable=true).",
        )
    if remote and "compact" in eff["cleanup.policy"]:
        # Kafka's LogConfig.validateNoRemoteStorageForCompactedTopic, same text
        raise ConfigError("cleanup.policy", COMPACTED_REMOTE_REFUSAL)
    retention_ms = eff["retention.ms"]
    retention_bytes = eff["retention.bytes"]
    check_local_retention(
        "local.retention.ms",
        eff["local.retention.ms"],
        "retention.ms",
        retention_ms,
        total_limited=retention_ms != -1,
    )
    check_local_retention(
        "local.retention.bytes",
        eff["local.retention.bytes"],
        "retention.bytes",
        retention_bytes,
        total_limited=retention_bytes > -1,
    )
    if eff["remote.log.copy.disable"]:
        for local_key, total_key in (
            ("local.retention.ms", "retention.ms"),
            ("local.retention.bytes", "retention.bytes"),
        ):
            if eff[local_key] not in (-2, eff[total_key]):
                raise ConfigError(
                    local_key,
                    "When remote.log.copy.disable is set to true, the local.retention.ms and "
                    "local.retention.bytes must be set to -2 or equal to retention.ms and "
                    "retention.bytes",
                )
    if (
        previous is not None
        and previous.get("remote.storage.enable")
        and not eff["remote.storage.enable"]
        and not eff["remote.log.delete.on.disable"]
    ):
        raise ConfigError(
            "remote.storage.enable",
            "It is invalid to disable remote storage without deleting remote data. If you want "
            "to keep the remote data and turn to read only, please set "
            "remote.storage.enable=true,remote.log.copy.disable=true. If you want to disable "
            "remote storage and delete all remote data, please set "
            "remote.storage.enable=false,remote.log.delete.on.disable=true.",
        )


def describe_topic_config(
    overrides: Mapping[str, Any],
    broker: BrokerConfig,
    *,
    include_synonyms: bool = False,
    only: set[str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs entries for one topic, with Kafka's source reporting."""
    entries: list[ConfigEntry] = []
    for definition in TOPIC_KEYS.all():
        name = definition.name
        if only is not None and name not in only:
            continue
        syns: list[ConfigSynonym] = []
        if name in overrides:
            syns.append(
                ConfigSynonym(name, render(overrides[name]), ConfigSource.DYNAMIC_TOPIC_CONFIG)
            )
        syns += [ConfigSynonym(*level) for level in broker.set_levels(definition.synonyms)]
        syns.append(_default_synonym(name))
        value, source, _ = broker_default(name, broker)
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=render(value),
                source=source,
                sensitive=definition.sensitive,
                read_only=False,
                synonyms=tuple(syns) if include_synonyms else (),
                doc=definition.doc,
                type_name=definition.type.value,
            )
        )
    return entries


def _default_synonym(name: str) -> ConfigSynonym:
    definition = TOPIC_KEYS[name]
    for syn_key in definition.synonyms:
        default = BROKER_KEYS[syn_key].default
        if default is not None:
            return ConfigSynonym(syn_key, render(default), ConfigSource.DEFAULT_CONFIG)
    return ConfigSynonym(name, render(definition.default), ConfigSource.DEFAULT_CONFIG)


def render_overrides(overrides: Mapping[str, Any]) -> dict[str, str]:
    """Parsed overrides back to text, for persistence."""
    return {k: r for k, v in overrides.items() if (r := render(v)) is not None}
