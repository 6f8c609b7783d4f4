"""Topic and broker configs: DescribeConfigs, then IncrementalAlterConfigs for a topic and
AlterConfigs for a broker, which is what Kafka 3.7's tool sends (it moved brokers to
IncrementalAlterConfigs only in 4.0). AlterConfigs replaces the whole dynamic set, so the
broker's current dynamic configs are read first and sent back with the change, and a
sensitive one, whose value the broker never returns, must be given again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tierlog.cli.configs.admin import BrokerRefused, ConfigsAdmin, ConfigsError, checked
from tierlog.cli.configs.options import BROKERS, TOPICS
from tierlog.client import WireConnection
from tierlog.config.sources import ConfigSource
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType
from tierlog.protocol.errors import KafkaError
from tierlog.server.topics import validate_topic_name

#: The broker default's resource name (Kafka's ``BrokerDefaultEntityName``).
DEFAULT = ""

_SET, _DELETE = 0, 1


def _source_name(source: int) -> str:
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN"


def _java(value: str | None) -> str:
    return "null" if value is None else value


def _target(admin: ConfigsAdmin, kind: str, name: str) -> tuple[int, WireConnection]:
    """The resource type and the broker that answers for it."""
    if kind == TOPICS:
        if name:
            try:
                validate_topic_name(name)
            except KafkaError as e:
                raise BrokerRefused(e.code, e.message) from None
        return ConfigResourceType.TOPIC, admin.bootstrap
    if name == DEFAULT:
        return ConfigResourceType.BROKER, admin.bootstrap
    try:
        broker_id = int(name)
    except ValueError:
        raise ConfigsError(
            f"The entity name for {kind} must be a valid integer broker id, found: {name}"
        ) from None
    return ConfigResourceType.BROKER, admin.to_broker(broker_id)


def _dynamic_source(kind: str, name: str) -> ConfigSource:
    if kind == TOPICS:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    if name == DEFAULT:
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return ConfigSource.DYNAMIC_BROKER_CONFIG


def resource_configs(
    admin: ConfigsAdmin, kind: str, name: str, *, synonyms: bool, everything: bool
) -> list[Any]:
    """The resource's config entries sorted by name: the dynamic ones (those set at this
    entity's own level), or all of them."""
    resource_type, conn = _target(admin, kind, name)
    r = conn.call(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
        ],
        include_synonyms=synonyms,
        include_documentation=False,
    )
    res = r.results[0]
    checked(res.error_code, res.error_message)
    wanted = _dynamic_source(kind, name)
    return sorted(
        (e for e in res.configs if everything or int(e.config_source) == wanted),
        key=lambda e: str(e.name),
    )


def describe(admin: ConfigsAdmin, kind: str, name: str | None, everything: bool) -> None:
    """``Dynamic configs for topic T are:`` (``All`` with ``--all``) and one line per entry;
    without a name every topic, or every broker then the cluster default."""
    if name is not None:
        names = [name]
    elif kind == TOPICS:
        names = admin.topic_names()
    else:
        names = [*map(str, admin.broker_ids()), DEFAULT]
    for entity in names:
        if entity == DEFAULT:
            print(f"Default configs for {kind} in the cluster are:")
        else:
            print(f"{'All' if everything else 'Dynamic'} configs for {kind[:-1]} {entity} are:")
        for e in resource_configs(admin, kind, entity, synonyms=True, everything=everything):
            synonyms = ", ".join(
                f"{_source_name(int(s.source))}:{s.name}={_java(s.value)}" for s in e.synonyms or ()
            )
            print(
                f"  {e.name}={_java(e.value)} sensitive={str(bool(e.is_sensitive)).lower()} "
                f"synonyms={{{synonyms}}}"
            )


def _current(admin: ConfigsAdmin, kind: str, name: str, to_delete: Sequence[str]) -> dict[str, Any]:
    """The entity's dynamic entries; deleting a key that has none is refused, as Kafka's
    tool refuses it before sending anything."""
    current = {
        str(e.name): e
        for e in resource_configs(admin, kind, name, synonyms=False, everything=False)
    }
    missing = [k for k in to_delete if k not in current]
    if missing:
        raise ConfigsError(f"Invalid config(s): {','.join(missing)}")
    return current


def alter_topic(
    admin: ConfigsAdmin, name: str, to_add: Mapping[str, str], to_delete: Sequence[str]
) -> None:
    """IncrementalAlterConfigs: a SET per added key, then a DELETE per deleted key."""
    _current(admin, TOPICS, name, to_delete)
    ops = [{"name": k, "config_operation": _SET, "value": v} for k, v in to_add.items()]
    ops += [{"name": k, "config_operation": _DELETE, "value": ""} for k in to_delete]
    r = admin.bootstrap.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            {"resource_type": ConfigResourceType.TOPIC, "resource_name": name, "configs": ops}
        ],
        validate_only=False,
    )
    checked(r.responses[0].error_code, r.responses[0].error_message)


def alter_broker(
    admin: ConfigsAdmin, name: str, to_add: Mapping[str, str], to_delete: Sequence[str]
) -> None:
    """AlterConfigs with the broker's (or the default's) whole new dynamic set."""
    current = _current(admin, BROKERS, name, to_delete)
    entries: dict[str, str | None] = {k: e.value for k, e in current.items()}
    entries.update(to_add)
    for k in to_delete:
        entries.pop(k, None)
    hidden = [k for k, v in entries.items() if v is None]
    if hidden:
        raise ConfigsError(
            "All sensitive broker config entries must be specified for --alter, missing "
            f"entries: Set({', '.join(hidden)})"
        )
    resource_type, conn = _target(admin, BROKERS, name)
    r = conn.call(
        ApiKey.ALTER_CONFIGS,
        2,
        resources=[
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in entries.items()],
            }
        ],
        validate_only=False,
    )
    checked(r.responses[0].error_code, r.responses[0].error_message)
