"""The options of ``tierlog configs``, as Kafka 3.7's ``kafka-configs.sh --bootstrap-server``
takes them, and the checks its ``ConfigCommandOptions.checkArgs`` makes, run before
connecting with Kafka's messages.

An entity is named either with ``--entity-type T`` plus ``--entity-name N`` or
``--entity-default`` (names pair with types by position, as in Kafka), or with a shorthand
(``--topic T``, ``--client-defaults``, ...). ``resolve`` turns both forms into Kafka's two
lists, ``entity_types`` and ``entity_names`` (``""`` for a default), which the rest of the
command reads."""

from __future__ import annotations

import argparse
import ipaddress
import socket
from pathlib import Path
from typing import Any

from tierlog.cli.common import UsageError, usage_errors
from tierlog.cli.configs.values import ConfigValueError, parse_to_add, parse_to_delete

TOPICS, CLIENTS, USERS, BROKERS, IPS = "topics", "clients", "users", "brokers", "ips"
BROKER_LOGGERS, CLIENT_METRICS = "broker-loggers", "client-metrics"

#: The entity types Kafka 3.7's tool takes with --bootstrap-server, in its message's order.
KAFKA_TYPES = (TOPICS, CLIENTS, USERS, BROKERS, IPS, BROKER_LOGGERS, CLIENT_METRICS)

#: Types Kafka's tool takes that tierlog's broker has nothing behind.
UNSERVED = {
    BROKER_LOGGERS: "tierlog has no dynamic logger levels (DescribeConfigs and "
    "IncrementalAlterConfigs on BROKER_LOGGER resources are not served)",
    CLIENT_METRICS: "tierlog has no client metrics subscriptions (KIP-714)",
}

#: Shorthand flags naming an entity, in Kafka's order (it builds its lists in this order).
NAME_FLAGS = (
    ("topic", TOPICS),
    ("client", CLIENTS),
    ("user", USERS),
    ("broker", BROKERS),
    ("broker_logger", BROKER_LOGGERS),
    ("ip", IPS),
)
DEFAULT_FLAGS = (
    ("client_defaults", CLIENTS),
    ("user_defaults", USERS),
    ("broker_defaults", BROKERS),
    ("ip_defaults", IPS),
)


def resolve(a: argparse.Namespace) -> None:
    """Kafka's ``entityTypes`` / ``entityNames``: the long form first, then the flags."""
    a.entity_types = list(a.entity_type or []) + [
        t for dest, t in (*NAME_FLAGS, *DEFAULT_FLAGS) if getattr(a, dest)
    ]
    a.entity_names = (
        list(a.entity_names_given or [])
        + [getattr(a, dest) for dest, _ in NAME_FLAGS if getattr(a, dest) is not None]
        + ["" for dest, _ in DEFAULT_FLAGS if getattr(a, dest)]
    )


def check_args(a: argparse.Namespace) -> None:
    """Kafka's checks in its order, then the configs to add or delete are read (a bad
    ``--add-config`` is refused before connecting too)."""
    with usage_errors(ConfigValueError):
        resolve(a)
        _check(a)
        a.to_add = parse_to_add(a.add_config, a.add_config_file) if a.alter else {}
        a.to_delete = parse_to_delete(a.delete_config) if a.alter else []
        for kind in a.entity_types:
            if kind in UNSERVED:
                raise UsageError(f"--entity-type {kind} is not supported: {UNSERVED[kind]}")


def _flag_used(a: argparse.Namespace) -> bool:
    return any(getattr(a, dest) not in (None, False) for dest, _ in (*NAME_FLAGS, *DEFAULT_FLAGS))


def _check(a: argparse.Namespace) -> None:
    if int(a.alter) + int(a.describe) != 1:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if a.describe:
        for dest in ("add_config", "delete_config"):
            if getattr(a, dest) is not None:
                name = dest.replace("_", "-")
                raise UsageError(f'Option "[describe]" can\'t be used with option "[{name}]"')
    types: list[str] = a.entity_types
    duplicates = sorted({t for t in types if types.count(t) > 1}, key=types.index)
    if duplicates:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    for t in types:
        if t not in KAFKA_TYPES:
            raise UsageError(
                f"Invalid entity type {t}, the entity type must be one of "
                f"{', '.join(KAFKA_TYPES)} with a --bootstrap-server or --bootstrap-controller "
                "argument"
            )
    if not types:
        raise UsageError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise UsageError(f"Only '{USERS}' and '{CLIENTS}' entity types may be specified together")
    long_form = a.entity_type or a.entity_names_given
    if long_form and _flag_used(a):
        raise UsageError(
            "--entity-{type,name,default} should not be used in conjunction with specific "
            "entity flags"
        )
    _check_names(a, types)


def _check_names(a: argparse.Namespace, types: list[str]) -> None:
    names: list[str] = a.entity_names
    has_name = any(names)
    has_default = "" in names
    if has_name and (BROKERS in types or BROKER_LOGGERS in types):
        given = (*(a.entity_names_given or []), a.broker, a.broker_logger)
        for broker_id in [n for n in given if n]:
            try:
                int(broker_id)
            except ValueError:
                raise UsageError(
                    f"The entity name for {types[0]} must be a valid integer broker id, but "
                    f"it is: {broker_id}"
                ) from None
    if has_name and IPS in types:
        for ip in [n for n in (*(a.entity_names_given or []), a.ip) if n]:
            if not valid_ip_entity(ip):
                raise UsageError(
                    f"The entity name for {types[0]} must be a valid IP or resolvable host, "
                    f"but it is: {ip}"
                )
    if a.describe and BROKER_LOGGERS in types and not has_name:
        raise UsageError(f"an entity name must be specified with --describe of {','.join(types)}")
    if a.alter:
        if {USERS, CLIENTS, BROKERS, IPS} & set(types):
            if not has_name and not has_default:
                raise UsageError(
                    "an entity-name or default entity must be specified with --alter of users, "
                    "clients, brokers or ips"
                )
        elif not has_name:
            raise UsageError(f"an entity name must be specified with --alter of {','.join(types)}")
        if a.add_config is not None and a.add_config_file is not None:
            raise UsageError("Only one of --add-config or --add-config-file must be specified")
        if a.add_config is None and a.add_config_file is None and a.delete_config is None:
            raise UsageError(
                "At least one of --add-config, --add-config-file, or --delete-config must be "
                "specified with --alter"
            )
        if len(types) != len(names):
            raise UsageError("An entity name must be specified for every entity type")


def valid_ip_entity(name: str) -> bool:
    """Kafka's ``isValidIpEntity``: an IP address, or a host name that resolves."""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return True


def register(sub: Any, run: Any) -> None:
    """The ``configs`` parser: Kafka's flags, checked by ``check_args``."""
    p = sub.add_parser(
        "configs",
        help="describe and alter topic, broker, client, user and ip configs (kafka-configs.sh)",
        description="This tool helps to manipulate and describe entity config for a topic, "
        "client, user, broker or ip.",
        allow_abbrev=False,
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument(
        "--all",
        action="store_true",
        help="List all configs for the given topic or broker entity (includes static "
        "configuration when the entity type is brokers)",
    )
    p.add_argument(
        "--entity-type",
        action="append",
        metavar="TYPE",
        help="Type of entity (topics/clients/users/brokers/ips); users and clients together "
        "name a user's client",
    )
    p.add_argument(
        "--entity-name",
        action="append",
        dest="entity_names_given",
        metavar="NAME",
        help="Name of entity (topic name/client id/user principal name/broker id/ip)",
    )
    p.add_argument(
        "--entity-default",
        action="append_const",
        const="",
        dest="entity_names_given",
        help="Default entity name for clients/users/brokers/ips (applies to corresponding "
        "entity type in command line)",
    )
    p.add_argument(
        "--add-config",
        metavar="K1=V1,K2=[V2,V3]",
        help="Key Value pairs of configs to add. Square brackets can be used to group values "
        "which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'.",
    )
    p.add_argument(
        "--add-config-file",
        type=Path,
        metavar="FILE",
        help="Path to a properties file with configs to add.",
    )
    p.add_argument(
        "--delete-config", action="append", metavar="K1,K2", help="config keys to remove 'k1,k2'"
    )
    p.add_argument("--force", action="store_true", help="Suppress console prompts (no effect)")
    flags = p.add_argument_group("entity shorthands")
    flags.add_argument("--topic", help="The topic's name.")
    flags.add_argument("--client", help="The client's ID.")
    flags.add_argument(
        "--client-defaults", action="store_true", help="The config defaults for all clients."
    )
    flags.add_argument("--user", help="The user's principal name.")
    flags.add_argument(
        "--user-defaults", action="store_true", help="The config defaults for all users."
    )
    flags.add_argument("--broker", help="The broker's ID.")
    flags.add_argument(
        "--broker-defaults", action="store_true", help="The config defaults for all brokers."
    )
    flags.add_argument(
        "--broker-logger", help="The broker's ID for its logger config (not served)."
    )
    flags.add_argument("--ip", help="The IP address.")
    flags.add_argument(
        "--ip-defaults", action="store_true", help="The config defaults for all IPs."
    )
    p.set_defaults(func=None, wire_fn=run, check_args=check_args)
