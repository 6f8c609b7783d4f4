"""The building blocks of config definitions: types, parsing, validators, errors.

Kafka's ``ConfigDef`` model, reduced to what tierlog needs: every key has a type, a default
(already parsed), a validator and a doc string. Parsing from text is what both
``server.properties`` and the admin APIs (CreateTopics, AlterConfigs) go through, so a value
is accepted or refused identically whichever way it arrives.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A config key is unknown or its value is invalid; the message always names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


class ConfigType(enum.Enum):
    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    SHORT = "short"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


# Short names the key tables (broker_keys, topic_keys) write the types with.
BOOL, STR, INT, LONG, DBL, LIST, SHORT, CLASS, PASSWORD = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.SHORT,
    ConfigType.CLASS,
    ConfigType.PASSWORD,
)


class Dynamic(enum.Enum):
    """Whether a broker key may change while the broker runs (Kafka's KIP-226 dynamic configs).

    Declared on each key so that the set AlterConfigs accepts, the ``read_only`` flag
    DescribeConfigs reports and the documentation are one fact, not lists to keep in step.
    """

    NO = "no"
    """Read at start only, in Kafka too: AlterConfigs refuses it as Kafka does."""
    LIVE = "live"
    """One of Kafka's dynamic broker keys that tierlog applies to a running broker, as a
    per-broker value (``/config/brokers/<id>``) or a cluster-wide default."""
    AT_START = "at_start"
    """Kafka updates it dynamically, but tierlog reads it only at start (or it has no effect
    in tierlog): refused with a message saying so rather than accepted without effect."""


Validator = Callable[[Any], str | None]
"""Returns None when the value is acceptable, otherwise the reason it is not."""


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    #: For topic keys: broker keys that provide the default, highest priority first.
    synonyms: tuple[str, ...] = ()
    sensitive: bool = False
    #: Accepted for compatibility with Kafka's server.properties but without effect here.
    no_effect: bool = False
    #: Broker keys: whether (and how) it can change while the broker runs.
    dynamic: Dynamic = Dynamic.NO
    #: Broker keys Kafka knows only as dynamic configs (``DynamicConfig.Broker``, not
    #: ``KafkaConfig``): set through the admin APIs, refused in ``server.properties``.
    dynamic_only: bool = False

    def parse(self, raw: str | None) -> Any:
        value = parse_value(self.name, self.type, raw)
        self.validate(value)
        return value

    def validate(self, value: Any) -> None:
        if value is None or self.validator is None:
            return
        problem = self.validator(value)
        if problem is not None:
            raise ConfigError(self.name, f"invalid value {render(value)!r}: {problem}")


_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), INT_MAX),
    ConfigType.LONG: (-(2**63), LONG_MAX),
}


def parse_value(key: str, type_: ConfigType, raw: str | None) -> Any:
    if raw is None:
        return None
    text = raw.strip()
    if type_ in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        try:
            n = int(text)
        except ValueError:
            raise ConfigError(key, f"{raw!r} is not a valid {type_.value}") from None
        lo, hi = _RANGES[type_]
        if not lo <= n <= hi:
            raise ConfigError(key, f"{n} does not fit in a {type_.value}")
        return n
    if type_ is ConfigType.BOOLEAN:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise ConfigError(key, f"{raw!r} is not a boolean (expected true or false)")
    if type_ is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(key, f"{raw!r} is not a number") from None
    if type_ is ConfigType.LIST:
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


def render(value: Any) -> str | None:
    """A parsed value back in Kafka's text form (what DescribeConfigs reports)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def at_least(lo: float) -> Validator:
    def check(v: Any) -> str | None:
        return None if v >= lo else f"Value must be at least {lo}"

    return check


def between(lo: float, hi: float) -> Validator:
    def check(v: Any) -> str | None:
        return None if lo <= v <= hi else f"Value must be in [{lo}, {hi}]"

    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    def check(v: Any) -> str | None:
        ok = v in choices if case_sensitive else v.lower() in {c.lower() for c in choices}
        return None if ok else f"String must be one of: {', '.join(choices)}"

    return check


def each_of(*choices: str) -> Validator:
    def check(v: Any) -> str | None:
        bad = [x for x in v if x not in choices]
        return None if not bad else f"Unknown item(s) {bad}; allowed: {', '.join(choices)}"

    return check


def non_empty(v: Any) -> str | None:
    return None if v != "" else "String must be non-empty"


def no_java_class(v: Any) -> str | None:
    """Refuses a Java class name (or a list of them) for a plugin key.

    Kafka loads these plugins from its class path; tierlog runs no JVM, so a named class
    would never run. Accepting it would silently drop what the operator asked for (a
    create-topic policy not enforced, a quota callback not consulted); only the empty
    default is accepted.
    """
    names = [n for n in (v if isinstance(v, list) else [v]) if n]
    if not names:
        return None
    return (
        f"tierlog cannot load Java classes ({', '.join(names)}); remove the key or leave it empty"
    )


#: Kafka's own JMX reporter: not a plugin but how Kafka exports its metrics (the default of
#: ``metric.reporters`` from Kafka 4.0, and often listed before that). tierlog exports the
#: same role's metrics to Prometheus, so naming it asks for nothing tierlog does not do.
JMX_REPORTER = "org.apache.kafka.common.metrics.JmxReporter"


def no_java_class_but_jmx(v: Any) -> str | None:
    """``no_java_class`` for ``metric.reporters``, which may also name ``JMX_REPORTER``."""
    return no_java_class([n for n in (v if isinstance(v, list) else [v]) if n != JMX_REPORTER])


def minus_one_or_at_least(lo: int) -> Validator:
    def check(v: Any) -> str | None:
        return None if v == -1 or v >= lo else f"Value must be -1 or at least {lo}"

    return check


@dataclass
class KeyRegistry:
    """An ordered set of key definitions with lookup by name."""

    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def add(self, *defs: ConfigKey) -> None:
        for d in defs:
            if d.name in self.keys:
                raise RuntimeError(f"duplicate config key {d.name}")
            self.keys[d.name] = d

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def __getitem__(self, name: str) -> ConfigKey:
        return self.keys[name]

    def get(self, name: str) -> ConfigKey | None:
        return self.keys.get(name)

    def all(self) -> Sequence[ConfigKey]:
        return list(self.keys.values())
