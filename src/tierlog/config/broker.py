"""The typed broker configuration, built from server.properties plus ``--override`` values.

Every key is checked at startup: an unknown key or an invalid value stops the broker with an
error naming the key, because a typo silently falling back to a default is how retention
settings get lost in production. Keys under the RSM/RLMM prefixes are passed through
(stripped) to the plugins instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tierlog.config.broker_keys import BROKER_KEYS, RLMM_KEYS, RLMM_PREFIX_KEY, RSM_PREFIX_KEY
from tierlog.config.cluster_rules import apply_cluster_rules
from tierlog.config.definitions import ConfigError, ConfigKey, render
from tierlog.config.kafka_versions import (
    FIRST_RELEASE_OF_FORMAT,
    ignores_message_format,
    record_format,
)
from tierlog.config.local_retention import check_local_retention
from tierlog.config.properties import read_properties
from tierlog.config.sources import ConfigSource

_UNIT_MS = {
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
    "log.retention.hours": 3_600_000,
    "log.retention.minutes": 60_000,
}


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def parse_listener(key: str, uri: str) -> Endpoint:
    if "://" not in uri:
        raise ConfigError(key, f"{uri!r} is not of the form NAME://host:port")
    name, rest = uri.split("://", 1)
    if not name:
        raise ConfigError(key, f"{uri!r} has an empty listener name")
    try:
        parts = urlsplit("//" + rest)
        port = parts.port
    except ValueError as e:
        raise ConfigError(key, f"{uri!r}: {e}") from None
    if port is None:
        raise ConfigError(key, f"{uri!r} has no port")
    return Endpoint(name.upper(), parts.hostname or "", port)


@dataclass(frozen=True)
class BrokerConfig:
    """Effective broker settings. ``values`` holds every broker key (explicit or default).

    ``explicit`` are the keys of ``server.properties`` and ``--override``. A config with
    dynamic values (``with_dynamic``) keeps them apart, each as normalised text, and keeps
    the static config it was built on, so a source and its synonyms can be reported.
    """

    values: Mapping[str, Any]
    explicit: frozenset[str]
    rsm_config: Mapping[str, str] = field(default_factory=dict)
    rlmm_config: Mapping[str, str] = field(default_factory=dict)
    #: ``/config/brokers/<id>`` (or the single node's file): DYNAMIC_BROKER_CONFIG.
    dynamic_broker: Mapping[str, str] = field(default_factory=dict)
    #: ``/config/brokers/<default>``: DYNAMIC_DEFAULT_BROKER_CONFIG.
    dynamic_default: Mapping[str, str] = field(default_factory=dict)
    #: The config read at start, under the dynamic values; None when this is it.
    static: BrokerConfig | None = None

    # ---- typed accessors -------------------------------------------------------------
    def get(self, key: str) -> Any:
        return self.values[key]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def listeners(self) -> list[Endpoint]:
        return [parse_listener("listeners", u) for u in self.values["listeners"]]

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        adv = self.values["advertised.listeners"]
        if not adv:
            return self.listeners
        return [parse_listener("advertised.listeners", u) for u in adv]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"]
        if dirs:
            return [Path(d) for d in dirs]
        return [Path(self.values["log.dir"])]

    @property
    def socket_request_max_bytes(self) -> int:
        return int(self.values["socket.request.max.bytes"])

    @property
    def connections_max_idle_ms(self) -> int:
        """-1: idle connections are never closed."""
        return int(self.values["connections.max.idle.ms"])

    @property
    def fetch_max_bytes(self) -> int:
        return int(self.values["fetch.max.bytes"])

    @property
    def max_incremental_fetch_session_cache_slots(self) -> int:
        return int(self.values["max.incremental.fetch.session.cache.slots"])

    @property
    def metrics_listener(self) -> tuple[str, int] | None:
        url = self.values["metrics.listener"]
        if not url:
            return None
        parts = urlsplit(url)
        return parts.hostname or "127.0.0.1", 9404 if parts.port is None else parts.port

    @property
    def auto_create_topics(self) -> bool:
        return bool(self.values["auto.create.topics.enable"])

    @property
    def num_partitions(self) -> int:
        return int(self.values["num.partitions"])

    @property
    def default_replication_factor(self) -> int:
        return int(self.values["default.replication.factor"])

    @property
    def retention_check_interval_ms(self) -> int:
        return int(self.values["log.retention.check.interval.ms"])

    @property
    def checkpoint_interval_ms(self) -> int:
        return int(self.values["log.flush.offset.checkpoint.interval.ms"])

    @property
    def remote_storage_system_enabled(self) -> bool:
        return bool(self.values["remote.log.storage.system.enable"])

    @property
    def offsets_topic_num_partitions(self) -> int:
        return int(self.values["offsets.topic.num.partitions"])

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        return int(self.values["group.initial.rebalance.delay.ms"])

    @property
    def group_min_session_timeout_ms(self) -> int:
        return int(self.values["group.min.session.timeout.ms"])

    @property
    def group_max_session_timeout_ms(self) -> int:
        return int(self.values["group.max.session.timeout.ms"])

    def resolve_synonym(self, synonyms: tuple[str, ...]) -> tuple[str, Any] | None:
        """The first broker synonym with a value, converted to the topic key's unit (ms)."""
        for key in synonyms:
            value = self.values.get(key)
            if value is None:
                continue
            unit = _UNIT_MS.get(key)
            return key, (value * unit if unit and value >= 0 else value)
        return None

    def with_dynamic(
        self, default: Mapping[str, str], per_broker: Mapping[str, str]
    ) -> BrokerConfig:
        """This broker's config under dynamic values (a per-broker value over a cluster-wide
        default over the static config); the cross-key rules are checked on the result, so
        ``ConfigError`` names a key whose new value conflicts with another."""
        base = self.static or self
        raw = dict(base._raw_items())
        raw.update(default)
        raw.update(per_broker)
        merged = load_broker_config(raw, with_dynamic=True)
        return BrokerConfig(
            values=merged.values,
            explicit=base.explicit,
            rsm_config=base.rsm_config,
            rlmm_config=base.rlmm_config,
            dynamic_broker=dict(per_broker),
            dynamic_default=dict(default),
            static=base,
        )

    def source(self, key: str) -> ConfigSource:
        """Which level ``key``'s value comes from."""
        if key in self.dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if key in self.dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if key in self.explicit:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def set_levels(self, keys: tuple[str, ...]) -> list[tuple[str, str | None, ConfigSource]]:
        """Each value set for one of ``keys`` above the defaults, as DescribeConfigs lists
        synonyms: every per-broker value, then every cluster default, then every static
        value, each level in the order of ``keys`` (Kafka's ``configSynonyms``)."""
        static = self.static or self
        out: list[tuple[str, str | None, ConfigSource]] = []
        for level, source in (
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ):
            out += [(k, level[k], source) for k in keys if k in level]
        out += [
            (k, render(static.values[k]), ConfigSource.STATIC_BROKER_CONFIG)
            for k in keys
            if k in static.explicit and static.values.get(k) is not None
        ]
        return out

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        raw = {k: v for k, v in self._raw_items()}
        raw.update(overrides)
        return load_broker_config(raw)

    def _raw_items(self) -> list[tuple[str, str]]:
        items: list[tuple[str, str]] = []
        for k in self.explicit:
            r = render(self.values[k])
            if r is not None:
                items.append((k, r))
        rsm_prefix = self.values[RSM_PREFIX_KEY]
        rlmm_prefix = self.values[RLMM_PREFIX_KEY]
        items += [(rsm_prefix + k, v) for k, v in self.rsm_config.items()]
        items += [(rlmm_prefix + k, v) for k, v in self.rlmm_config.items()]
        return items


def _check_cross_key_rules(values: dict[str, Any]) -> None:
    retention_ms = effective_retention_ms(values)
    check_local_retention(
        "log.local.retention.ms",
        values["log.local.retention.ms"],
        "log.retention.ms",
        retention_ms,
        total_limited=retention_ms != -1,
    )
    retention_bytes = values["log.retention.bytes"]
    check_local_retention(
        "log.local.retention.bytes",
        values["log.local.retention.bytes"],
        "log.retention.bytes",
        retention_bytes,
        total_limited=retention_bytes > -1,
    )
    _check_version_rules(values)
    if values["max.connections.per.ip"] == 0 and not values["max.connections.per.ip.overrides"]:
        raise ConfigError(
            "max.connections.per.ip",
            "can be set to zero only if max.connections.per.ip.overrides is set (otherwise "
            "no client could connect)",
        )
    if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
        raise ConfigError(
            "group.min.session.timeout.ms", "must not exceed group.max.session.timeout.ms"
        )
    for key in ("listeners", "advertised.listeners"):
        for uri in values[key] or []:
            parse_listener(key, uri)
    if not values["listeners"]:
        raise ConfigError("listeners", "at least one listener is required")
    names = {parse_listener("listeners", u).listener for u in values["listeners"]}
    rlmm_listener = values["remote.log.metadata.manager.listener.name"]
    if rlmm_listener is not None and rlmm_listener.upper() not in names:
        raise ConfigError(
            "remote.log.metadata.manager.listener.name",
            f"{rlmm_listener!r} is not one of the listeners {sorted(names)}",
        )
    if (
        values["remote.log.storage.system.enable"]
        and not values["remote.log.storage.manager.class.name"]
    ):
        raise ConfigError(
            "remote.log.storage.manager.class.name",
            "must be set when remote.log.storage.system.enable=true",
        )


def _check_version_rules(values: Mapping[str, Any]) -> None:
    """Kafka's checks of the two version keys, which tierlog otherwise ignores: a broker
    whose inter-broker protocol is older than the record format it is told to write (or
    than the ``zstd`` its offsets topic would use) refuses to start, so a file that a Kafka
    broker would refuse is refused here too rather than carried to a real Kafka later."""
    protocol = values["inter.broker.protocol.version"]
    protocol_format = record_format(protocol)
    if not ignores_message_format(protocol):
        message_format = values["log.message.format.version"]
        wanted = record_format(message_format)
        if wanted > protocol_format:
            raise ConfigError(
                "log.message.format.version",
                f"{message_format} can only be used when inter.broker.protocol.version is set "
                f"to version {FIRST_RELEASE_OF_FORMAT[wanted]} or higher",
            )
    if values["offsets.topic.compression.codec"] == 4 and protocol_format < 2:
        raise ConfigError(
            "offsets.topic.compression.codec",
            "zstd (4) can only be used when inter.broker.protocol.version writes record "
            "format v2 (0.11.0 or higher)",
        )


def effective_retention_ms(values: Mapping[str, Any]) -> int:
    for key, unit in (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ):
        v = values.get(key)
        if v is not None:
            return int(v) if v < 0 else int(v) * unit
    return 604_800_000


def load_broker_config(raw: Mapping[str, str], *, with_dynamic: bool = False) -> BrokerConfig:
    """Validate raw text key/values (file merged with overrides) into a ``BrokerConfig``.

    A key Kafka knows only as a dynamic config is refused unless ``with_dynamic`` (the
    static config merged with the dynamic values, ``BrokerConfig.with_dynamic``)."""
    rsm_prefix = _prefix(raw, RSM_PREFIX_KEY)
    rlmm_prefix = _prefix(raw, RLMM_PREFIX_KEY)
    values: dict[str, Any] = {d.name: d.default for d in BROKER_KEYS.all()}
    explicit: set[str] = set()
    rsm: dict[str, str] = {}
    rlmm: dict[str, str] = {}
    for key, text in raw.items():
        if key.startswith(rsm_prefix):
            rsm[key[len(rsm_prefix) :]] = text
            continue
        if key.startswith(rlmm_prefix):
            sub = key[len(rlmm_prefix) :]
            known: ConfigKey | None = RLMM_KEYS.get(sub)
            if known is not None:
                try:
                    known.parse(text)
                except ConfigError as e:
                    raise ConfigError(key, e.message) from None
            rlmm[sub] = text
            continue
        definition = BROKER_KEYS.get(key)
        if definition is None:
            raise ConfigError(key, "unknown broker config key")
        if definition.dynamic_only and not with_dynamic:
            raise ConfigError(
                key,
                "is a dynamic broker config only, as in Kafka: set it with kafka-configs.sh "
                "--entity-type brokers --alter (or an AlterConfigs request)",
            )
        values[key] = definition.parse(text)
        explicit.add(key)
    _check_cross_key_rules(values)
    apply_cluster_rules(values, explicit)
    return BrokerConfig(
        values=values, explicit=frozenset(explicit), rsm_config=rsm, rlmm_config=rlmm
    )


def _prefix(raw: Mapping[str, str], key: str) -> str:
    text = raw.get(key)
    if text is None:
        return str(BROKER_KEYS[key].default)
    return str(BROKER_KEYS[key].parse(text))


def parse_override(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError(item, "an override must be of the form key=value")
    key, value = item.split("=", 1)
    return key.strip(), value


def broker_config_from_sources(
    config_file: Path | None, overrides: list[str] | tuple[str, ...] = ()
) -> BrokerConfig:
    raw: dict[str, str] = read_properties(config_file) if config_file is not None else {}
    for item in overrides:
        key, value = parse_override(item)
        raw[key] = value
    return load_broker_config(raw)
