"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Topic configs are dynamic (stored per topic; in cluster mode in ``/config/topics/<t>``, which
every broker follows: ``replication.topic_configs``). Broker configs are Kafka's dynamic broker
configs (``server.dynamic_config``): resource name ``""`` is the cluster-wide default, ``"<id>"``
this broker (another broker's id is refused, as Kafka's broker refuses it); only the keys
declared live can change, and describing the default resource lists only the values set there.
Storage-plugin pass-through keys (``rsm.config.*``, including the
embedded defaults the broker fills in) are described with their values unless the plugin
class says a key may hold a secret; metadata-plugin keys are always hidden.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from tierlog.config.broker import BrokerConfig
from tierlog.config.broker_keys import BROKER_KEYS
from tierlog.config.definitions import ConfigKey, ConfigType, Dynamic, render
from tierlog.config.dynamic_broker import DEFAULT_ENTITY, is_list_key, key_default_text
from tierlog.config.incremental import list_op
from tierlog.config.sources import ConfigSource, broker_key_synonyms
from tierlog.config.topic import ConfigEntry, ConfigSynonym
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.config_resources import ConfigResourceType
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.state import BrokerState
from tierlog.server.tiering import plugin_settings
from tierlog.tiered.api import (
    RSM_ALIASES,
    RSM_CLASS_KEY,
    PluginLoadError,
    RemoteStorageManager,
    plugin_class,
)

_TYPE_IDS = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


def _entry_dict(e: ConfigEntry, include_docs: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": None if e.sensitive else e.value,
        "read_only": e.read_only,
        "config_source": int(e.source),
        "is_sensitive": e.sensitive,
        "synonyms": [
            {"name": s.name, "value": None if e.sensitive else s.value, "source": int(s.source)}
            for s in e.synonyms
        ],
        "config_type": _TYPE_IDS.get(e.type_name, 0),
        "documentation": e.doc if include_docs else None,
    }


def _broker_synonyms(cfg: BrokerConfig, name: str, per_broker: bool) -> list[ConfigSynonym]:
    """Kafka's synonyms of a broker key: each value set for it or a synonym, level by level,
    then their defaults, from the first one named ``name`` on; the default resource leaves
    out per-broker values."""
    keys = broker_key_synonyms(name)
    levels = [ConfigSynonym(*level) for level in cfg.set_levels(keys)]
    for key in keys:
        default = render(BROKER_KEYS[key].default)
        if default is not None:
            levels.append(ConfigSynonym(key, default, ConfigSource.DEFAULT_CONFIG))
    if not per_broker:
        levels = [s for s in levels if s.source is not ConfigSource.DYNAMIC_BROKER_CONFIG]
    while levels and levels[0].name != name:
        levels.pop(0)
    return levels


def _broker_entry(
    d: ConfigKey, value: str | None, synonyms: list[ConfigSynonym], with_synonyms: bool
) -> ConfigEntry:
    return ConfigEntry(
        name=d.name,
        value=value,
        source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        sensitive=d.sensitive or d.type is ConfigType.PASSWORD,
        read_only=d.dynamic is not Dynamic.LIVE,
        synonyms=tuple(synonyms) if with_synonyms else (),
        doc=d.doc,
        type_name=d.type.value,
    )


def default_broker_entries(
    state: BrokerState, keys: set[str] | None, with_synonyms: bool
) -> list[ConfigEntry]:
    """The cluster-wide default resource (name ``""``): only the values set there."""
    cfg = state.config
    out: list[ConfigEntry] = []
    for name, value in sorted(cfg.dynamic_default.items()):
        d = BROKER_KEYS.get(name)
        if d is None or (keys is not None and name not in keys):
            continue
        synonyms = _broker_synonyms(cfg, name, per_broker=False)
        out.append(_broker_entry(d, value, synonyms, with_synonyms))
    return out


def broker_entries(
    state: BrokerState, keys: set[str] | None, with_synonyms: bool = False
) -> list[ConfigEntry]:
    cfg = state.config
    out: list[ConfigEntry] = []
    for d in BROKER_KEYS.all():
        if keys is not None and d.name not in keys:
            continue
        synonyms = _broker_synonyms(cfg, d.name, per_broker=True)
        if (
            d.dynamic_only
            and d.name not in cfg.dynamic_broker
            and d.name not in cfg.dynamic_default
        ):
            continue  # not a KafkaConfig key: Kafka lists it only once it is set
        out.append(_broker_entry(d, render(cfg.values[d.name]), synonyms, with_synonyms))
    settings = plugin_settings(cfg)
    secret = _rsm_secrecy(settings.rsm_class)
    prefixes = (
        (cfg.values["remote.log.storage.manager.impl.prefix"], settings.rsm_props, secret),
        (cfg.values["remote.log.metadata.manager.impl.prefix"], cfg.rlmm_config, _all_secret),
    )
    for prefix, passthrough, is_secret in prefixes:
        for k in sorted(passthrough):
            name = prefix + k
            if keys is not None and name not in keys:
                continue
            hidden = is_secret(k)
            out.append(
                ConfigEntry(
                    name=name,
                    value=None if hidden else passthrough[k],
                    source=ConfigSource.STATIC_BROKER_CONFIG
                    if k in cfg.rsm_config or passthrough is cfg.rlmm_config
                    else ConfigSource.DEFAULT_CONFIG,
                    sensitive=hidden,
                    read_only=True,
                    synonyms=(),
                    doc="Passed to the plugin; hidden because it may hold credentials."
                    if hidden
                    else "Passed to the plugin.",
                    type_name="password" if hidden else "string",
                )
            )
    return out


def _all_secret(key: str) -> bool:
    return True


@functools.lru_cache(maxsize=8)
def _rsm_secrecy(class_name: str) -> Callable[[str], bool]:
    """The storage plugin's own answer to which settings are secret, asked of its class
    (loaded by name, never imported concretely here); everything is secret if it cannot
    be loaded."""
    try:
        base: type[RemoteStorageManager] = RemoteStorageManager  # type: ignore[type-abstract]
        cls = plugin_class(class_name, base, RSM_ALIASES, config_key=RSM_CLASS_KEY)
    except PluginLoadError:
        return _all_secret
    return cls.config_is_sensitive


async def handle_describe_configs(state: BrokerState, req: Request) -> Any:
    body = req.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    docs = bool(getattr(body, "include_documentation", False))
    results: list[dict[str, Any]] = []
    for r in body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        res: dict[str, Any] = {
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "error_code": 0,
            "error_message": None,
            "configs": [],
        }
        try:
            if r.resource_type == ConfigResourceType.TOPIC:
                entries = state.topics.describe_configs(r.resource_name, keys, synonyms)
            elif r.resource_type == ConfigResourceType.BROKER:
                if broker_entity(state, r.resource_name) == DEFAULT_ENTITY:
                    entries = default_broker_entries(state, keys, synonyms)
                else:
                    entries = broker_entries(state, keys, synonyms)
            else:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}"
                )
            res["configs"] = [_entry_dict(e, docs) for e in entries]
        except KafkaError as e:
            res.update(error_code=e.code, error_message=e.message)
        results.append(res)
    return mk(
        response_schema(ApiKey.DESCRIBE_CONFIGS, req.header.api_version),
        throttle_time=0,
        results=results,
    )


def broker_entity(state: BrokerState, name: str) -> str:
    """A BROKER resource's entity: ``<default>`` for ``""``, else this broker's own id (a
    request for another broker's configs is Kafka's INVALID_REQUEST)."""
    if name == "":
        return DEFAULT_ENTITY
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != state.node_id:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {state.node_id}, but received {name}",
        )
    return str(broker_id)


BrokerValues = Callable[[Any, dict[str, str]], dict[str, str]]
"""A BROKER resource of the request and the entity's stored values -> its new set."""


async def _alter_broker(state: BrokerState, r: Any, new: BrokerValues, validate_only: bool) -> None:
    entity = broker_entity(state, r.resource_name)
    dynamic = state.dynamic_config
    if dynamic is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "this broker has no dynamic configs")
    await dynamic.alter(entity, lambda stored: new(r, stored), validate_only=validate_only)


def _replace_broker(r: Any, stored: dict[str, str]) -> dict[str, str]:
    """AlterConfigs: the request's set replaces the entity's dynamic values, as in Kafka."""
    return {c.name: c.value for c in r.configs if c.value is not None}


def _alter_broker_incrementally(r: Any, stored: dict[str, str]) -> dict[str, str]:
    """IncrementalAlterConfigs: SET, DELETE, and for list keys APPEND / SUBTRACT, which start
    from the key's default when the entity has no value for it (Kafka's rule)."""
    out = dict(stored)
    for c in r.configs:
        key, op, value = c.name, int(c.config_operation), c.value
        if op == 0:
            if value is not None:
                out[key] = value
        elif op == 1:
            out.pop(key, None)
        elif op in (2, 3):
            if not is_list_key(key):
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value append is not allowed for config key: {key}"
                    if op == 2
                    else f"Config value subtract is not allowed for config key: {key}",
                )
            out[key] = list_op(out.get(key, key_default_text(key)), value, op)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
    return out


def _tiering_before(state: BrokerState, topic: str) -> dict[Any, bool]:
    return state.tiering.config_snapshot(topic) if state.tiering is not None else {}


async def _tiering_after(state: BrokerState, topic: str, before: dict[Any, bool]) -> None:
    """Tiering reacts to the new topic config: copy off/on, tiering on, or off with delete."""
    if state.tiering is not None:
        await state.tiering.after_config_change(topic, before)


NewOverrides = Callable[[Any, Mapping[str, str]], dict[str, str | None]]
"""A resource of the request and the topic's current overrides -> its complete new set."""


async def _alter_one(state: BrokerState, r: Any, new: NewOverrides, validate_only: bool) -> None:
    """Cluster mode: through ``/config/topics/<t>``, so every broker applies it (validated
    here against this broker's copy of the topic). Single node: the local topic store."""
    name = r.resource_name
    repl = state.replication
    if repl is not None and repl.manages(name):

        def change(current: dict[str, str]) -> dict[str, str]:
            wanted = new(r, current)
            state.topics.replace_configs(name, wanted, validate_only=True)
            return {k: v for k, v in wanted.items() if v is not None}

        await repl.alter_topic_config(name, change, validate_only=validate_only)
        return
    before = _tiering_before(state, name)
    state.topics.replace_configs(
        name, new(r, state.topics.overrides(name)), validate_only=validate_only
    )
    if not validate_only:
        await _tiering_after(state, name, before)


def _refuse_duplicate_keys(r: Any) -> None:
    """A key given twice for one resource is refused, as Kafka refuses it: which of the two
    values (or operations) was meant is not for the broker to guess."""
    names = [c.name for c in r.configs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"duplicate config keys: {', '.join(duplicates)}"
        )


async def _alter_each(
    state: BrokerState, req: Request, api_key: ApiKey, new: NewOverrides, broker: BrokerValues
) -> Any:
    """Give each resource of an AlterConfigs-like request its new values: ``new`` overrides
    for a topic (tiering reacts unless ``validate_only``), ``broker`` values for a broker
    resource. Each resource gets its own error code."""
    body = req.body
    out: list[dict[str, Any]] = []
    for r in body.resources:
        res = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            _refuse_duplicate_keys(r)
            if r.resource_type == ConfigResourceType.BROKER:
                await _alter_broker(state, r, broker, bool(body.validate_only))
            elif r.resource_type == ConfigResourceType.TOPIC:
                await _alter_one(state, r, new, bool(body.validate_only))
            else:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}"
                )
            res.update(error_code=0, error_message=None)
        except KafkaError as e:
            res.update(error_code=e.code, error_message=e.message)
        out.append(res)
    return mk(response_schema(api_key, req.header.api_version), throttle_time=0, responses=out)


async def handle_alter_configs(state: BrokerState, req: Request) -> Any:
    def replace(r: Any, current: Mapping[str, str]) -> dict[str, str | None]:
        return {c.name: c.value for c in r.configs}

    return await _alter_each(state, req, ApiKey.ALTER_CONFIGS, replace, _replace_broker)


async def handle_incremental_alter_configs(state: BrokerState, req: Request) -> Any:
    def alter(r: Any, current: Mapping[str, str]) -> dict[str, str | None]:
        ops = [(c.name, int(c.config_operation), c.value) for c in r.configs]
        return state.topics.altered(current, ops)

    return await _alter_each(
        state, req, ApiKey.INCREMENTAL_ALTER_CONFIGS, alter, _alter_broker_incrementally
    )
