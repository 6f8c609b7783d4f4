"""``tierlog broker-configs``: Kafka's ``kafka-configs.sh --entity-type brokers``, over the
wire: describe or alter one broker's dynamic configs (``--entity-name ID``) or the
cluster-wide default (``--entity-default``, the resource named ``""``, which librdkafka and
kafka-python cannot name).

A per-broker resource is answered only by that broker, so the command asks the bootstrap
broker's Metadata where it is and talks to it there, as Kafka's admin client does.
"""

from __future__ import annotations

import argparse
from typing import Any

from tierlog.cli.common import CLIENT_ID, check, kv
from tierlog.client import WireConnection
from tierlog.config.sources import ConfigSource
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType

_DYNAMIC = (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


def _resource(a: argparse.Namespace) -> str:
    return "" if a.entity_default else str(a.entity_name)


def _label(a: argparse.Namespace) -> str:
    return "the default broker" if a.entity_default else f"broker {a.entity_name}"


def _on_entity(c: WireConnection, a: argparse.Namespace, call: Any) -> Any:
    """``call`` on the broker the resource names (any broker for the default)."""
    if a.entity_default:
        return call(c)
    md = c.call(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False)
    where = {int(b.node_id): (b.host, int(b.port)) for b in md.brokers}
    target = where.get(int(a.entity_name))
    if target is None:
        raise SystemExit(f"broker {a.entity_name} is not in the cluster's Metadata")
    with WireConnection(*target, client_id=CLIENT_ID) as conn:
        return call(conn)


def _synonyms(entry: Any) -> str:
    return ", ".join(
        f"{ConfigSource(int(s.source)).name}:{s.name}={s.value}" for s in entry.synonyms or []
    )


def broker_configs_describe(c: WireConnection, a: argparse.Namespace) -> None:
    def describe(conn: WireConnection) -> Any:
        return conn.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {
                    "resource_type": ConfigResourceType.BROKER,
                    "resource_name": _resource(a),
                    "configuration_keys": None,
                }
            ],
            include_synonyms=True,
            include_documentation=False,
        )

    res = _on_entity(c, a, describe).results[0]
    check(res.error_code, res.error_message, f"describe {_label(a)}")
    shown = [e for e in res.configs if a.all or int(e.config_source) in _DYNAMIC]
    print(f"{'All' if a.all else 'Dynamic'} configs for {_label(a)} are:")
    for e in shown:
        print(
            f"  {e.name}={e.value} sensitive={str(bool(e.is_sensitive)).lower()} "
            f"synonyms={{{_synonyms(e)}}}"
        )


def broker_configs_alter(c: WireConnection, a: argparse.Namespace) -> None:
    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in kv(a.set).items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in a.delete or []]
    if not ops:
        raise SystemExit("nothing to alter: give --set KEY=VALUE or --delete KEY")

    def alter(conn: WireConnection) -> Any:
        return conn.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                {
                    "resource_type": ConfigResourceType.BROKER,
                    "resource_name": _resource(a),
                    "configs": ops,
                }
            ],
            validate_only=bool(a.validate_only),
        )

    res = _on_entity(c, a, alter).responses[0]
    check(res.error_code, res.error_message, f"alter {_label(a)}")
    done = "Validated" if a.validate_only else "Completed updating"
    print(f"{done} config for {_label(a)}.")


def register(sub: Any) -> None:
    """The ``broker-configs`` command and its actions."""
    b = sub.add_parser(
        "broker-configs",
        help="dynamic broker configs (kafka-configs.sh --entity-type brokers)",
    )
    bsub = b.add_subparsers(dest="action", required=True)
    for name, fn in (("describe", broker_configs_describe), ("alter", broker_configs_alter)):
        sp = bsub.add_parser(name)
        sp.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        which = sp.add_mutually_exclusive_group(required=True)
        which.add_argument("--entity-name", type=int, metavar="BROKER_ID")
        which.add_argument("--entity-default", action="store_true", help="the cluster-wide default")
        if name == "describe":
            sp.add_argument(
                "--all", action="store_true", help="every key, not only the dynamic values"
            )
        else:
            sp.add_argument("--set", action="append", metavar="KEY=VALUE")
            sp.add_argument("--delete", action="append", metavar="KEY")
            sp.add_argument("--validate-only", action="store_true")
        sp.set_defaults(func=None, wire_fn=fn)
