"""``tierlog reassign-partitions``: Kafka's ``kafka-reassign-partitions.sh`` (cluster
mode, on the controller)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierlog.cli.common import by_topic, check, on_controller, read_json
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode


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
    ra.set_defaults(func=None, wire_fn=reassign_partitions)
