"""Which broker keys a running broker takes, and the check of a requested dynamic set.

The answer is declared on each key (``ConfigKey.dynamic``, ``broker_keys``); this module
turns a request's keys into Kafka's answers. A key that exists but is read only at start is
refused as Kafka refuses it (``Cannot update these configs dynamically: Set(...)``); a key
Kafka can change live but tierlog cannot is refused too, with a message that says so,
because accepting it without effect would leave the operator believing it applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tierlog.config.broker import BrokerConfig
from tierlog.config.broker_keys import BROKER_KEYS, RLMM_PREFIX_KEY, RSM_PREFIX_KEY
from tierlog.config.definitions import ConfigError, ConfigType, Dynamic, render

#: The entity name of the cluster-wide default in ZooKeeper (``/config/brokers/<default>``).
DEFAULT_ENTITY = "<default>"


class DynamicUpdateRefused(ValueError):
    """Keys that exist but cannot be changed on a running broker (Kafka: INVALID_REQUEST)."""


def kafka_set(names: Iterable[str]) -> str:
    """Names as Kafka's messages print a Scala ``Set``, so scripts matching them still match."""
    return f"Set({', '.join(sorted(names))})"


def live_keys() -> frozenset[str]:
    """Every broker key a running broker applies."""
    return frozenset(d.name for d in BROKER_KEYS.all() if d.dynamic is Dynamic.LIVE)


def check_dynamic_set(props: Mapping[str, str], static: BrokerConfig) -> dict[str, str]:
    """The requested dynamic values, checked one by one and normalised to Kafka's text form.

    ``DynamicUpdateRefused`` names every key that cannot change live; ``ConfigError`` an
    unknown key or an invalid value. Cross-key rules are ``BrokerConfig.with_dynamic``'s.
    """
    prefixes = (str(static.get(RSM_PREFIX_KEY)), str(static.get(RLMM_PREFIX_KEY)))
    at_start_only: list[str] = []
    without_effect: list[str] = []
    unknown: list[str] = []
    for key in props:
        definition = BROKER_KEYS.get(key)
        if definition is None:
            if key.startswith(prefixes):
                at_start_only.append(key)
            else:
                unknown.append(key)
        elif definition.dynamic is Dynamic.NO:
            at_start_only.append(key)
        elif definition.dynamic is Dynamic.AT_START:
            (without_effect if definition.no_effect else at_start_only).append(key)
    kafka_static = [k for k in at_start_only if _kafka_static(k)]
    if kafka_static:
        raise DynamicUpdateRefused(
            f"Cannot update these configs dynamically: {kafka_set(kafka_static)}"
        )
    if at_start_only:
        raise DynamicUpdateRefused(
            "Cannot update these configs dynamically in tierlog, which reads them only when "
            "the broker starts (Kafka can change them live): "
            f"{kafka_set(at_start_only)}; set them in server.properties and restart"
        )
    if without_effect:
        raise DynamicUpdateRefused(
            "Cannot update these configs dynamically: they have no effect in tierlog: "
            f"{kafka_set(without_effect)}"
        )
    if unknown:
        raise ConfigError(unknown[0], f"Unknown config name: {unknown[0]}")
    out: dict[str, str] = {}
    for key, text in props.items():
        value = BROKER_KEYS[key].parse(text)
        rendered = render(value)
        if rendered is not None:
            out[key] = rendered
    return out


def _kafka_static(key: str) -> bool:
    definition = BROKER_KEYS.get(key)
    return definition is None or definition.dynamic is Dynamic.NO


def is_list_key(key: str) -> bool:
    """Whether IncrementalAlterConfigs may APPEND to or SUBTRACT from ``key``."""
    definition = BROKER_KEYS.get(key)
    return definition is not None and definition.type is ConfigType.LIST


def key_default_text(key: str) -> str:
    """The key's default as text: where Kafka starts an APPEND with no dynamic value."""
    definition = BROKER_KEYS.get(key)
    if definition is None:
        return ""
    return render(definition.default) or ""
