"""``tierlog reassign-partitions``: Kafka's ``kafka-reassign-partitions.sh`` (cluster
mode, on the controller).

``--execute --throttle RATE`` throttles the move as Kafka's tool does: each moving topic's
``leader.replication.throttled.replicas`` names the partition's current replicas and its
``follower.replication.throttled.replicas`` the replicas being added, and every broker of
the move gets ``leader/follower.replication.throttled.rate`` as its own dynamic config.
``--verify``, once every partition of the plan has completed, removes those configs from
every broker and the plan's topics ("Throttle was removed.").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierlog.cli.common import CLIENT_ID, by_topic, check, on_controller, read_json
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType
from tierlog.protocol.errors import ErrorCode

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def _reassignment_plan(path: Path) -> dict[tuple[str, int], list[int]]:
    """Kafka's reassignment JSON: ``{"version":1,"partitions":[{"topic":..,"partition":..,
    "replicas":[..]}]}`` (``log_dirs`` may be present; only ``any`` is supported)."""
    doc = read_json(path)
    plan: dict[tuple[str, int], list[int]] = {}
    try:
        for entry in doc["partitions"]:
            dirs = entry.get("log_dirs")
            if dirs is not None and any(d != "any" for d in dirs):
                raise SystemExit("tierlog: log_dirs other than 'any' are not supported")
            key = (str(entry["topic"]), int(entry["partition"]))
            if key in plan:
                raise SystemExit(f"tierlog: partition {key[0]}-{key[1]} appears twice")
            plan[key] = [int(r) for r in entry["replicas"]]
    except (KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"tierlog: {path} is not a reassignment JSON file: {e!r}") from None
    if not plan:
        raise SystemExit(f"tierlog: {path} names no partition")
    return plan


def _current_replicas(c: WireConnection, topics: Sequence[str]) -> dict[tuple[str, int], list[int]]:
    md = c.call(
        ApiKey.METADATA, 12, topics=[{"name": t} for t in topics], allow_auto_topic_creation=False
    )
    return {
        (t.name, int(p.partition_index)): [int(r) for r in p.replica_nodes]
        for t in md.topics
        for p in t.partitions
    }


def _ongoing(c: WireConnection, plan: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Any]:
    def listed(conn: WireConnection) -> Any:
        return conn.call(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            0,
            timeout=30_000,
            topics=[{"name": t, "partition_indexes": ps} for t, ps in by_topic(list(plan)).items()],
        )

    r = on_controller(c, listed, lambda r: int(r.error_code))
    check(r.error_code, r.error_message, "list partition reassignments")
    return {(t.name, int(p.partition_index)): p for t in r.topics for p in t.partitions}


def _alter_configs(
    conn: WireConnection, resource_type: int, name: str, ops: list[tuple[str, str | None]]
) -> None:
    """IncrementalAlterConfigs: SET each (key, value), DELETE each (key, None)."""
    r = conn.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [
                    {"name": k, "config_operation": 0 if v is not None else 1, "value": v}
                    for k, v in ops
                ],
            }
        ],
        validate_only=False,
    )
    res = r.responses[0]
    check(res.error_code, res.error_message, f"alter configs of {name or 'the default'}")


def _on_each_broker(
    c: WireConnection, brokers: set[int] | None, ops: list[tuple[str, str | None]]
) -> None:
    """``ops`` on each broker's own dynamic configs (every live broker for None), sent to
    that broker, which alone answers for its entity."""
    md = c.call(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False)
    for b in md.brokers:
        broker_id = int(b.node_id)
        if brokers is None or broker_id in brokers:
            with WireConnection(b.host, int(b.port), client_id=CLIENT_ID) as conn:
                _alter_configs(conn, ConfigResourceType.BROKER, str(broker_id), ops)


def _throttle(
    c: WireConnection,
    plan: dict[tuple[str, int], list[int]],
    current: dict[tuple[str, int], list[int]],
    rate: int,
) -> None:
    """Kafka's throttles of a move: leaders = each moving partition's current replicas,
    followers = the replicas it adds; the rate on every broker taking part."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    involved: set[int] = set()
    for (topic, p), target in plan.items():
        now = current.get((topic, p), [])
        if now == target:
            continue
        leaders.setdefault(topic, []).extend(f"{p}:{b}" for b in now)
        followers.setdefault(topic, []).extend(f"{p}:{b}" for b in target if b not in now)
        involved |= set(now) | set(target)
    for topic in sorted(leaders):
        _alter_configs(
            c,
            ConfigResourceType.TOPIC,
            topic,
            [
                (REPLICA_KEYS[0], ",".join(leaders[topic])),
                (REPLICA_KEYS[1], ",".join(followers[topic])),
            ],
        )
    _on_each_broker(c, involved, [(k, str(rate)) for k in RATE_KEYS])
    print(f"The inter-broker throttle limit was set to {rate} B/s")
    print(
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed."
    )


def _remove_throttles(c: WireConnection, topics: set[str]) -> None:
    _on_each_broker(c, None, [(k, None) for k in RATE_KEYS])
    for topic in sorted(topics):
        _alter_configs(c, ConfigResourceType.TOPIC, topic, [(k, None) for k in REPLICA_KEYS])
    print("Throttle was removed.")


def reassign_partitions(c: WireConnection, a: argparse.Namespace) -> None:
    """Kafka's ``kafka-reassign-partitions.sh`` over AlterPartitionReassignments (45) and
    ListPartitionReassignments (46)."""
    plan = _reassignment_plan(a.reassignment_json_file)
    current = _current_replicas(c, sorted({t for t, _ in plan}))
    if a.verify:
        ongoing = _ongoing(c, list(plan))
        for (topic, p), target in plan.items():
            name = f"{topic}-{p}"
            if (topic, p) in ongoing:
                print(f"Reassignment of partition {name} is still in progress.")
            elif current.get((topic, p)) == target:
                print(f"Reassignment of partition {name} is completed.")
            else:
                print(
                    f"There is no active reassignment of partition {name}, but replica set is "
                    f"{current.get((topic, p))} rather than {target}."
                )
        if not ongoing:
            _remove_throttles(c, {t for t, _ in plan})
        return
    if a.execute:
        print("Current partition replica assignment\n")
        print(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": t, "partition": p, "replicas": current.get((t, p), [])}
                        for t, p in plan
                    ],
                }
            )
        )
        print()

    def alter(conn: WireConnection) -> Any:
        return conn.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            timeout=30_000,
            topics=[
                {
                    "name": t,
                    "partitions": [
                        {"partition_index": p, "replicas": None if a.cancel else plan[(t, p)]}
                        for p in ps
                    ],
                }
                for t, ps in by_topic(list(plan)).items()
            ],
        )

    if a.execute and a.throttle is not None:
        _throttle(c, plan, current, a.throttle)
    r = on_controller(c, alter, lambda r: int(r.error_code))
    check(r.error_code, r.error_message, "alter partition reassignments")
    failed = [
        (f"{t.name}-{p.partition_index}", p)
        for t in r.responses
        for p in t.partitions
        if int(p.error_code) != 0
    ]
    if failed:
        for name, p in failed:
            print(f"{name}: {ErrorCode(int(p.error_code)).name}: {p.error_message}")
        raise SystemExit(1)
    names = ",".join(f"{t}-{p}" for t, p in plan)
    if a.cancel:
        print(f"Successfully cancelled partition reassignments for: {names}")
    else:
        print(f"Successfully started partition reassignments for {names}")


def register(sub: Any) -> None:
    """The ``reassign-partitions`` command."""
    ra = sub.add_parser(
        "reassign-partitions", help="move partition replicas (Kafka's reassignment JSON)"
    )
    ra.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    ra.add_argument("--reassignment-json-file", required=True, type=Path, metavar="FILE")
    mode = ra.add_mutually_exclusive_group(required=True)
    mode.add_argument("--execute", action="store_true", help="start the reassignment")
    mode.add_argument("--verify", action="store_true", help="report its progress")
    mode.add_argument("--cancel", action="store_true", help="cancel it (back to the original)")
    ra.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES_PER_SECOND",
        help="with --execute: throttle the replicas being moved to this rate (--verify "
        "removes it once the move has completed)",
    )
    ra.set_defaults(func=None, wire_fn=reassign_partitions)
