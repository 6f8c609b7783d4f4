"""``tierlog leader-election``: Kafka's ``kafka-leader-election.sh`` (cluster mode, on the
controller)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tierlog.cli.common import by_topic, check, on_controller, read_json
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode


def _election_partitions(a: argparse.Namespace) -> list[tuple[str, int]] | None:
    if a.all_topic_partitions:
        return None
    if a.path_to_json_file is not None:
        doc = read_json(a.path_to_json_file)
        try:
            return [(str(e["topic"]), int(e["partition"])) for e in doc["partitions"]]
        except (KeyError, TypeError, ValueError) as e:
            raise SystemExit(f"tierlog: {a.path_to_json_file}: {e!r}") from None
    if a.partition is None:
        raise SystemExit("tierlog: --topic needs --partition")
    return [(a.topic, a.partition)]


def leader_election(c: WireConnection, a: argparse.Namespace) -> None:
    """Kafka's ``kafka-leader-election.sh`` over ElectLeaders (43)."""
    partitions = _election_partitions(a)
    election_type = 0 if a.election_type == "preferred" else 1

    def elect(conn: WireConnection) -> Any:
        return conn.call(
            ApiKey.ELECT_LEADERS,
            2,
            election_type=election_type,
            timeout=30_000,
            topic_partitions=None
            if partitions is None
            else [{"topic": t, "partitions": ps} for t, ps in by_topic(partitions).items()],
        )

    r = on_controller(c, elect, lambda r: int(r.error_code))
    check(r.error_code, None, "elect leaders")
    done, not_needed, failed = [], [], []
    for t in r.replica_election_results:
        for p in t.partition_result:
            name = f"{t.topic}-{p.partition_id}"
            code = int(p.error_code)
            if code == 0:
                done.append(name)
            elif code == ErrorCode.ELECTION_NOT_NEEDED:
                not_needed.append(name)
            else:
                failed.append(f"{name}: {ErrorCode(code).name}: {p.error_message}")
    kind = a.election_type.upper()
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(done)}")
    if not_needed and partitions is not None:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if failed:
        print(f"Leader election ({kind}) failed for partitions:")
        for line in failed:
            print(f"\t{line}")
        raise SystemExit(1)
    if not done and partitions is None:
        print("No partitions needed an election.")


def register(sub: Any) -> None:
    """The ``leader-election`` command."""
    le = sub.add_parser("leader-election", help="elect preferred or unclean leaders")
    le.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    le.add_argument("--election-type", required=True, choices=["preferred", "unclean"])
    which = le.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--path-to-json-file", type=Path, metavar="FILE")
    le.add_argument("--partition", type=int)
    le.set_defaults(func=None, wire_fn=leader_election)
