"""Client quotas of users, client ids and ips: DescribeClientQuotas and AlterClientQuotas on
the bootstrap broker, and DescribeUserScramCredentials after a user describe, as Kafka 3.7's
tool asks them. SCRAM credentials cannot be altered: tierlog authenticates no client yet,
so a credential would protect nothing, and the broker does not serve
AlterUserScramCredentials; the command refuses before sending anything."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tierlog.cli.configs.admin import ConfigsAdmin, ConfigsError, checked
from tierlog.cli.configs.options import CLIENTS, IPS, USERS
from tierlog.cli.configs.values import java_double, parse_java_double
from tierlog.cli.coordinators import error_name
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

#: The quota entity type of each command entity type, and how Kafka's output names it.
WIRE_TYPE = {USERS: "user", CLIENTS: "client-id", IPS: "ip"}
_LABEL = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}

QUOTA_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
IP_KEYS = frozenset({"connection_creation_rate"})
SCRAM = frozenset({"SCRAM-SHA-256", "SCRAM-SHA-512"})

_EXACT, _DEFAULT, _ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]


def _components(types: Sequence[str], names: Sequence[str]) -> list[dict[str, Any]]:
    """Kafka's filter: by position, a name matches exactly, ``""`` the default, and a type
    with no name every entity of that type."""
    if len(names) > len(types):
        raise ConfigsError("More entity names specified than entity types")
    out = []
    for i, kind in enumerate(types):
        if i >= len(names):
            out.append({"entity_type": WIRE_TYPE[kind], "match_type": _ANY, "match": None})
        elif names[i] == "":
            out.append({"entity_type": WIRE_TYPE[kind], "match_type": _DEFAULT, "match": None})
        else:
            out.append({"entity_type": WIRE_TYPE[kind], "match_type": _EXACT, "match": names[i]})
    return out


def quotas(
    admin: ConfigsAdmin, types: Sequence[str], names: Sequence[str]
) -> dict[Entity, dict[str, float]]:
    """DescribeClientQuotas with a strict filter (only entities of exactly these types)."""
    r = admin.bootstrap.call(
        ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, components=_components(types, names), strict=True
    )
    checked(r.error_code, r.error_message)
    found: dict[Entity, dict[str, float]] = {}
    for e in r.entries or ():
        entity = tuple(sorted((str(c.entity_type), c.entity_name) for c in e.entity))
        found[entity] = {str(v.key): float(v.value) for v in e.values}
    return found


def _entity_text(entity: Entity) -> str:
    named = dict(entity)
    parts = []
    for wire in ("user", "client-id", "ip"):
        if wire in named:
            name = named[wire]
            label = _LABEL[wire]
            parts.append(f"{label} '{name}'" if name is not None else f"the default {label}")
    return ", ".join(parts)


def describe(admin: ConfigsAdmin, types: Sequence[str], names: Sequence[str]) -> None:
    """``Quota configs for client-id 'app' are producer_byte_rate=1024.0`` per entity; for
    users (no client, no default) then each user's SCRAM credentials."""
    found = quotas(admin, types, names)
    for entity in sorted(found, key=_entity_text):
        values = ", ".join(f"{k}={java_double(v)}" for k, v in sorted(found[entity].items()))
        print(f"Quota configs for {_entity_text(entity)} are {values}")
    if types[0] in (USERS, CLIENTS) and CLIENTS not in types and "" not in names:
        _describe_scram(admin, names)


def _describe_scram(admin: ConfigsAdmin, users: Sequence[str]) -> None:
    r = admin.bootstrap.call(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        users=[{"name": u} for u in users] if users else None,
    )
    checked(r.error_code, r.error_message)
    for result in r.results:
        user = str(result.user)
        code = int(result.error_code)
        if code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        if code != 0:
            print(
                f"Error retrieving SCRAM credential configs for user-principal '{user}': "
                f"{error_name(code)}: {result.error_message}"
            )
            continue
        infos = ", ".join(
            f"{_mechanism(int(i.mechanism))}=iterations={int(i.iterations)}"
            for i in result.credential_infos
        )
        print(f"SCRAM credential configs for user-principal '{user}' are {infos}")


def _mechanism(code: int) -> str:
    return {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(code, "UNKNOWN")


def check_keys(
    types: Sequence[str], names: Sequence[str], to_add: Mapping[str, str], to_delete: Sequence[str]
) -> None:
    """Kafka's refusals of keys an entity type does not take, then tierlog's of SCRAM."""
    head = types[0]
    if head == IPS:
        unknown = [k for k in (*to_add, *to_delete) if k not in IP_KEYS]
        if unknown:
            raise ConfigsError(
                f"Only connection quota configs can be added for '{IPS}' using "
                f"--bootstrap-server. Unexpected config names: {','.join(unknown)}"
            )
        return
    add_unknown = [k for k in to_add if k not in QUOTA_KEYS and k not in SCRAM]
    del_unknown = [k for k in to_delete if k not in QUOTA_KEYS and k not in SCRAM]
    add_scram = [k for k in to_add if k in SCRAM]
    del_scram = [k for k in to_delete if k in SCRAM]
    if head == CLIENTS or len(types) == 2:
        if add_unknown or add_scram:
            raise ConfigsError(
                f"Only quota configs can be added for '{CLIENTS}' using --bootstrap-server. "
                f"Unexpected config names: {_scala_set([*add_unknown, *add_scram])}"
            )
        if del_unknown or del_scram:
            raise ConfigsError(
                f"Only quota configs can be deleted for '{CLIENTS}' using --bootstrap-server. "
                f"Unexpected config names: {_scala_set([*del_unknown, *del_scram])}"
            )
        return
    if add_unknown:
        raise ConfigsError(
            f"Only quota and SCRAM credential configs can be added for '{USERS}' using "
            f"--bootstrap-server. Unexpected config names: {_scala_set(add_unknown)}"
        )
    if del_unknown:
        raise ConfigsError(
            f"Only quota and SCRAM credential configs can be deleted for '{USERS}' using "
            f"--bootstrap-server. Unexpected config names: {_scala_set(del_unknown)}"
        )
    if add_scram or del_scram:
        if "" in names:
            raise ConfigsError(
                "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                "Credentials using --bootstrap-server."
            )
        if any(k in QUOTA_KEYS for k in (*to_add, *to_delete)):
            raise ConfigsError(
                f"Cannot alter both quota and SCRAM credential configs simultaneously for "
                f"'{USERS}' using --bootstrap-server."
            )
        raise ConfigsError(
            f"SCRAM credentials cannot be altered: tierlog does not authenticate clients yet, "
            f"so it stores none (asked: {', '.join([*add_scram, *del_scram])} for user "
            f"'{names[0]}')"
        )


def _scala_set(keys: Sequence[str]) -> str:
    return f"Set({', '.join(keys)})"


def alter(
    admin: ConfigsAdmin,
    types: Sequence[str],
    names: Sequence[str],
    to_add: Mapping[str, str],
    to_delete: Sequence[str],
) -> None:
    """AlterClientQuotas of one entity: a value per added key, a removal per deleted one
    (a key the entity does not set cannot be deleted)."""
    values = {k: parse_java_double(k, v) for k, v in to_add.items()}
    current = next(iter(quotas(admin, types, names).values()), {})
    missing = [k for k in to_delete if k not in current]
    if missing:
        raise ConfigsError(f"Invalid config(s): {','.join(missing)}")
    ops = [{"key": k, "value": v, "remove": False} for k, v in values.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in to_delete]
    entity = [
        {"entity_type": WIRE_TYPE[t], "entity_name": n or None}
        for t, n in zip(types, names, strict=True)
    ]
    r = admin.bootstrap.call(
        ApiKey.ALTER_CLIENT_QUOTAS, 1, entries=[{"entity": entity, "ops": ops}], validate_only=False
    )
    for e in r.entries:
        checked(e.error_code, e.error_message)
