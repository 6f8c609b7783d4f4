"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Topic configs are dynamic (stored per topic; in cluster mode in ``/config/topics/<t>``, which
every broker follows: ``replication.topic_configs``). Broker configs are static in tierlog: they
can be described (sources STATIC_BROKER_CONFIG / DEFAULT_CONFIG) but altering them is refused
with a clear message. Storage-plugin pass-through keys (``rsm.config.*``, including the
embedded defaults the broker fills in) are described with their values unless the plugin
class says a key may hold a secret; metadata-plugin keys are always hidden.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from tierlog.config.broker_keys import BROKER_KEYS
from tierlog.config.definitions import ConfigType, render
from tierlog.config.topic import ConfigEntry, ConfigSource
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


def broker_entries(state: BrokerState, keys: set[str] | None) -> list[ConfigEntry]:
    cfg = state.config
    out: list[ConfigEntry] = []
    for d in BROKER_KEYS.all():
        if keys is not None and d.name not in keys:
            continue
        explicit = d.name in cfg.explicit
        source = ConfigSource.STATIC_BROKER_CONFIG if explicit else ConfigSource.DEFAULT_CONFIG
        out.append(
            ConfigEntry(
                name=d.name,
                value=render(cfg.values[d.name]),
                source=source,
                sensitive=d.sensitive or d.type is ConfigType.PASSWORD,
                read_only=True,
                synonyms=(),
                doc=d.doc,
                type_name=d.type.value,
            )
        )
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
                if r.resource_name not in ("", str(state.node_id)):
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST, f"Unexpected broker id {r.resource_name}"
                    )
                entries = broker_entries(state, keys)
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


def _refuse_broker(resource_type: int, name: str, state: BrokerState) -> None:
    if resource_type == ConfigResourceType.BROKER:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "tierlog broker configs are static: change server.properties or --override and restart",
        )
    if resource_type != ConfigResourceType.TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


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


async def _alter_each(state: BrokerState, req: Request, api_key: ApiKey, new: NewOverrides) -> Any:
    """Give each topic resource of an AlterConfigs-like request its ``new`` overrides.

    Broker resources are refused, tiering reacts to the change (unless ``validate_only``),
    and each resource gets its own error code.
    """
    body = req.body
    out: list[dict[str, Any]] = []
    for r in body.resources:
        res = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            _refuse_broker(r.resource_type, r.resource_name, state)
            await _alter_one(state, r, new, bool(body.validate_only))
            res.update(error_code=0, error_message=None)
        except KafkaError as e:
            res.update(error_code=e.code, error_message=e.message)
        out.append(res)
    return mk(response_schema(api_key, req.header.api_version), throttle_time=0, responses=out)


async def handle_alter_configs(state: BrokerState, req: Request) -> Any:
    def replace(r: Any, current: Mapping[str, str]) -> dict[str, str | None]:
        return {c.name: c.value for c in r.configs}

    return await _alter_each(state, req, ApiKey.ALTER_CONFIGS, replace)


async def handle_incremental_alter_configs(state: BrokerState, req: Request) -> Any:
    def alter(r: Any, current: Mapping[str, str]) -> dict[str, str | None]:
        ops = [(c.name, int(c.config_operation), c.value) for c in r.configs]
        return state.topics.altered(current, ops)

    return await _alter_each(state, req, ApiKey.INCREMENTAL_ALTER_CONFIGS, alter)
