"""Command line: ``tierlog serve | topics ... | reassign-partitions | leader-election |
dump-log | keys rewrap | docs``.

``topics``, ``reassign-partitions`` and ``leader-election`` talk to a running broker over
the Kafka wire protocol (our own codec over a plain socket), so they work against any
Kafka-compatible broker, and exercise the same code paths as real clients.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from tierlog.client import BrokerConnections, ListedOffset, WireConnection
from tierlog.config.broker import broker_config_from_sources
from tierlog.config.definitions import ConfigError
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType
from tierlog.protocol.errors import ErrorCode
from tierlog.server.log_cleaner import DIRTY_RATIO_METRIC

#: Used by ``tierlog serve`` without ``--config``: a broker that runs out of the box.
EMBEDDED_DEFAULTS = (
    "log.dirs=./data",
    "listeners=PLAINTEXT://127.0.0.1:9092",
)


#: The client id (and ApiVersions software name) the admin commands announce.
CLIENT_ID = "tierlog-cli"

T = TypeVar("T")


def _check(code: int, message: str | None, what: str) -> None:
    if int(code) != 0:
        name = ErrorCode(int(code)).name
        raise SystemExit(f"{what}: {name}" + (f": {message}" if message else ""))


def _kv(items: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


# ---- topics ---------------------------------------------------------------------------------
def topics_create(c: WireConnection, a: argparse.Namespace) -> None:
    def create(conn: WireConnection) -> tuple[int, str | None]:
        return conn.create_topic(
            a.topic, a.partitions, _kv(a.config), replication_factor=a.replication_factor
        )

    code, message = _on_controller(c, create, lambda r: r[0])
    _check(code, message, f"create {a.topic}")
    print(f"Created topic {a.topic}.")


def _on_controller(
    c: WireConnection, call: Callable[[WireConnection], T], error: Callable[[T], int]
) -> T:
    """``call`` on ``c``; answered NOT_CONTROLLER, again on the controller its Metadata names
    (a cluster serves topic creation, deletion, elections and reassignments there, as
    Kafka's admin client sends them)."""
    answer = call(c)
    if error(answer) != ErrorCode.NOT_CONTROLLER:
        return answer
    md = c.call(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False)
    where = {int(b.node_id): (b.host, int(b.port)) for b in md.brokers}
    controller = where.get(int(md.controller_id))
    if controller is None:
        return answer
    with WireConnection(*controller, client_id=CLIENT_ID) as conn:
        return call(conn)


def topics_list(c: WireConnection, a: argparse.Namespace) -> None:
    r = c.call(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False)
    for t in sorted(r.topics, key=lambda t: t.name or ""):
        print(t.name)


def _supports(c: WireConnection, api_key: ApiKey, version: int) -> bool:
    """ApiVersions says the broker serves ``version`` of ``api_key``."""
    r = c.call(ApiKey.API_VERSIONS, 3, client_software_name=CLIENT_ID, client_software_version="0")
    return any(
        int(k.api_key) == api_key and int(k.min_version) <= version <= int(k.max_version)
        for k in r.api_keys
    )


def describe(c: WireConnection, topic: str) -> dict[str, Any]:
    md = c.call(ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
    t = md.topics[0]
    _check(t.error_code, None, f"describe {topic}")
    parts = sorted(p.partition_index for p in t.partitions)
    offsets: dict[int, dict[str, int | None]] = {p: {} for p in parts}
    by_index = {p.partition_index: p for p in t.partitions}
    leaders = _LeaderConnections(c, md)
    try:
        # -4 EARLIEST_LOCAL needs ListOffsets v8+, -5 LATEST_TIERED v9+: both asked with v9; a
        # broker without them (older Kafka) leaves those two fields null instead of failing
        for ts, key, version in (
            (-2, "log_start_offset", 7),
            (-1, "high_watermark", 7),
            (-4, "local_log_start_offset", 9),
            (-5, "latest_tiered_offset", 9),
        ):
            if version > 7 and not _supports(c, ApiKey.LIST_OFFSETS, version):
                for p in parts:
                    offsets[p][key] = None
                continue
            for index, answer in leaders.list_offsets(topic, parts, ts, version, by_index).items():
                _check(answer.error_code, None, f"list offsets {topic}-{index}")
                offsets[index][key] = answer.offset
    finally:
        leaders.close()
    dc = c.call(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[
            {
                "resource_type": ConfigResourceType.TOPIC,
                "resource_name": topic,
                "configuration_keys": None,
            }
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    res = dc.results[0]
    _check(res.error_code, res.error_message, f"describe configs {topic}")
    sources = {1: "DYNAMIC_TOPIC_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
    return {
        "topic": topic,
        "topic_id": str(t.topic_id),
        "partitions": [
            {
                "partition": p,
                "leader": int(by_index[p].leader_id),
                "leader_epoch": int(by_index[p].leader_epoch),
                "replicas": [int(r) for r in by_index[p].replica_nodes],
                "isr": [int(r) for r in by_index[p].isr_nodes],
                "log_start_offset": offsets[p]["log_start_offset"],
                "high_watermark": offsets[p]["high_watermark"],
                "local_log_start_offset": offsets[p]["local_log_start_offset"],
                "latest_tiered_offset": offsets[p]["latest_tiered_offset"],
            }
            for p in parts
        ],
        "configs": {e.name: e.value for e in res.configs},
        "config_sources": {
            e.name: sources.get(int(e.config_source), "UNKNOWN") for e in res.configs
        },
    }


class _LeaderConnections:
    """ListOffsets is answered by each partition's leader only (a cluster): ask the
    bootstrap broker first, then the leader of every partition it does not lead."""

    def __init__(self, bootstrap: WireConnection, metadata: Any) -> None:
        self._brokers = BrokerConnections(bootstrap, metadata, CLIENT_ID)

    def list_offsets(
        self, topic: str, parts: list[int], ts: int, version: int, by_index: dict[int, Any]
    ) -> dict[int, ListedOffset]:
        answers = self._brokers.bootstrap.list_offsets(topic, parts, ts, version=version)
        elsewhere: dict[int, list[int]] = {}
        for index, p in answers.items():
            leader = int(by_index[index].leader_id)
            if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and self._brokers.knows(leader):
                elsewhere.setdefault(leader, []).append(index)
        for leader, indexes in elsewhere.items():
            conn = self._brokers.to(leader)
            answers.update(conn.list_offsets(topic, indexes, ts, version=version))
        return dict(sorted(answers.items()))

    def close(self) -> None:
        self._brokers.close()


def dirty_ratios(urls: Sequence[str], topic: str) -> dict[int, float]:
    """Each partition's ``tierlog_log_cleaner_dirty_ratio`` read from the brokers' metrics
    endpoints; every broker reports its own replica, and the highest is shown (the replica
    furthest from clean, as Kafka's ``max-dirty-percent`` takes the dirtiest log)."""
    out: dict[int, float] = {}
    for given in urls:
        url = given.rstrip("/")
        if not url.endswith("/metrics"):
            url += "/metrics"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                text = resp.read().decode("utf-8")
        except OSError as e:
            raise SystemExit(f"cannot read metrics from {url}: {e}") from e
        for family in text_string_to_metric_families(text):
            if family.name != DIRTY_RATIO_METRIC:
                continue
            for sample in family.samples:
                if sample.labels.get("topic") == topic:
                    index = int(sample.labels["partition"])
                    out[index] = max(out.get(index, 0.0), float(sample.value))
    return out


def topics_describe(c: WireConnection, a: argparse.Namespace) -> None:
    d = describe(c, a.topic)
    compacted = "compact" in (d["configs"].get("cleanup.policy") or "").split(",")
    ratios = dirty_ratios(a.metrics_url or [], a.topic) if compacted else {}
    for p in d["partitions"]:
        p["dirty_ratio"] = ratios.get(p["partition"])
    if a.json:
        print(json.dumps(d, indent=2, sort_keys=True))
        return
    print(f"Topic: {d['topic']}\tTopicId: {d['topic_id']}\tPartitionCount: {len(d['partitions'])}")
    overrides = {
        k: v for k, v in d["configs"].items() if d["config_sources"][k] != "DEFAULT_CONFIG"
    }
    print("Configs: " + ",".join(f"{k}={v}" for k, v in sorted(overrides.items())))
    for p in d["partitions"]:
        print(
            f"\tPartition: {p['partition']}\tLogStartOffset: {p['log_start_offset']}"
            f"\tLocalLogStartOffset: {p['local_log_start_offset']}"
            f"\tLatestTieredOffset: {p['latest_tiered_offset']}"
            f"\tHighWatermark: {p['high_watermark']}"
            + (f"\tDirtyRatio: {_ratio(p['dirty_ratio'])}" if compacted else "")
        )


def _ratio(value: float | None) -> str:
    return "unknown (no --metrics-url)" if value is None else f"{value:.4f}"


# ---- remote ---------------------------------------------------------------------------------
def remote_segments_cmd(c: WireConnection, a: argparse.Namespace) -> None:
    from tierlog.remote_segments import RemoteSegmentsError, remote_segments

    try:
        rows = remote_segments(c, a.topic, a.partition)
    except RemoteSegmentsError as e:
        raise SystemExit(f"tierlog: {e}") from None
    if a.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return
    print("PARTITION\tSTART\tEND\tSTATE\tSIZE\tMAX_TIMESTAMP\tBROKER\tSEGMENT_ID")
    for r in rows:
        print(
            f"{r['partition']}\t{r['start_offset']}\t{r['end_offset']}\t{r['state']}"
            f"\t{r['size_bytes']}\t{r['max_timestamp_ms']}\t{r['broker_id']}\t{r['segment_id']}"
        )


def topics_alter_config(c: WireConnection, a: argparse.Namespace) -> None:
    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in _kv(a.set).items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in a.delete or []]
    r = c.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            {"resource_type": ConfigResourceType.TOPIC, "resource_name": a.topic, "configs": ops}
        ],
        validate_only=False,
    )
    res = r.responses[0]
    _check(res.error_code, res.error_message, f"alter {a.topic}")
    print(f"Updated configs of {a.topic}.")


def topics_alter(c: WireConnection, a: argparse.Namespace) -> None:
    """``kafka-topics.sh --alter --partitions``: CreatePartitions, on the controller in a
    cluster; the new partitions' replicas are assigned as Kafka assigns them."""

    def grow(conn: WireConnection) -> Any:
        return conn.call(
            ApiKey.CREATE_PARTITIONS,
            3,
            topics=[{"name": a.topic, "count": a.partitions, "assignments": None}],
            timeout=30_000,
            validate_only=False,
        )

    r = _on_controller(c, grow, lambda r: int(r.results[0].error_code))
    res = r.results[0]
    _check(res.error_code, res.error_message, f"alter {a.topic}")
    print(f"Increased the partition count of {a.topic} to {a.partitions}.")


def topics_delete(c: WireConnection, a: argparse.Namespace) -> None:
    def delete(conn: WireConnection) -> Any:
        return conn.call(ApiKey.DELETE_TOPICS, 5, topic_names=[a.topic], timeout=30_000)

    r = _on_controller(c, delete, lambda r: int(r.responses[0].error_code))
    res = r.responses[0]
    _check(res.error_code, res.error_message, f"delete {a.topic}")
    print(f"Deleted topic {a.topic}.")


# ---- reassign-partitions / leader-election (cluster mode, on the controller) ----------------
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"tierlog: cannot read {path}: {e}") from None


def _reassignment_plan(path: Path) -> dict[tuple[str, int], list[int]]:
    """Kafka's reassignment JSON: ``{"version":1,"partitions":[{"topic":..,"partition":..,
    "replicas":[..]}]}`` (``log_dirs`` may be present; only ``any`` is supported)."""
    doc = _read_json(path)
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


def _by_topic(keys: Sequence[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in keys:
        out.setdefault(topic, []).append(p)
    return out


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
            topics=[
                {"name": t, "partition_indexes": ps} for t, ps in _by_topic(list(plan)).items()
            ],
        )

    r = _on_controller(c, listed, lambda r: int(r.error_code))
    _check(r.error_code, r.error_message, "list partition reassignments")
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
                for t, ps in _by_topic(list(plan)).items()
            ],
        )

    r = _on_controller(c, alter, lambda r: int(r.error_code))
    _check(r.error_code, r.error_message, "alter partition reassignments")
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


def _election_partitions(a: argparse.Namespace) -> list[tuple[str, int]] | None:
    if a.all_topic_partitions:
        return None
    if a.path_to_json_file is not None:
        doc = _read_json(a.path_to_json_file)
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
            else [{"topic": t, "partitions": ps} for t, ps in _by_topic(partitions).items()],
        )

    r = _on_controller(c, elect, lambda r: int(r.error_code))
    _check(r.error_code, None, "elect leaders")
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


# ---- serve / dump-log / docs ----------------------------------------------------------------
def serve(a: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, a.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for name in a.debug or []:
        logging.getLogger(name).setLevel(logging.DEBUG)
    overrides = list(a.override or [])
    if a.config is None:
        overrides = [*EMBEDDED_DEFAULTS, *overrides]
    try:
        config = broker_config_from_sources(a.config, overrides)
    except ConfigError as e:
        print(f"tierlog: config error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tierlog: cannot read config: {e}", file=sys.stderr)
        return 2
    from tierlog.server.broker import run
    from tierlog.server.state_files import StateFileError
    from tierlog.server.tiering import TieringStartupError

    try:
        run(config)
    except ConfigError as e:
        print(f"tierlog: config error: {e}", file=sys.stderr)
        return 2
    except TieringStartupError as e:
        print(f"tierlog: tiered storage cannot start: {e}", file=sys.stderr)
        return 1
    except StateFileError as e:
        print(f"tierlog: broker state file: {e}", file=sys.stderr)
        return 1
    return 0


def dump_log(a: argparse.Namespace) -> int:
    from tierlog.log.dump import dump_file

    try:
        for line in dump_file(Path(a.path), deep=not a.headers_only):
            print(line)
    except BrokenPipeError:  # reader went away (e.g. `| head`)
        return 0
    except (OSError, ValueError) as e:
        print(f"tierlog: cannot dump {a.path}: {e}", file=sys.stderr)
        return 1
    return 0


def docs(a: argparse.Namespace) -> int:
    from tierlog.server.operations_doc import render_operations_doc

    text = render_operations_doc()
    if a.output:
        Path(a.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


#: ``tierlog keys rewrap`` lives in the object-store plugin; it is imported by module path
#: only when the command runs, so the CLI (and the broker it starts) never loads a plugin.
KEYS_REWRAP_MODULE = "tierlog.storage.objectstore.rewrap"


def keys_rewrap(argv: Sequence[str]) -> int:
    import importlib

    module = importlib.import_module(KEYS_REWRAP_MODULE)
    return int(module.main(list(argv)))


#: ``tierlog audit`` / ``tierlog usage`` are Spark jobs; imported only when they run.
SPARK_JOBS = {"audit", "usage"}


def spark_job(name: str, argv: Sequence[str]) -> int:
    from tierlog.spark import jobs

    return int(jobs.audit_main(argv) if name == "audit" else jobs.usage_main(argv))


def _add_cluster_admin(sub: Any) -> None:
    """``reassign-partitions`` and ``leader-election``: Kafka's tools, as wire clients."""
    ra = sub.add_parser(
        "reassign-partitions", help="move partition replicas (Kafka's reassignment JSON)"
    )
    ra.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    ra.add_argument("--reassignment-json-file", required=True, type=Path, metavar="FILE")
    mode = ra.add_mutually_exclusive_group(required=True)
    mode.add_argument("--execute", action="store_true", help="start the reassignment")
    mode.add_argument("--verify", action="store_true", help="report its progress")
    mode.add_argument("--cancel", action="store_true", help="cancel it (back to the original)")
    ra.set_defaults(func=None, topic_fn=reassign_partitions)

    le = sub.add_parser("leader-election", help="elect preferred or unclean leaders")
    le.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    le.add_argument("--election-type", required=True, choices=["preferred", "unclean"])
    which = le.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--path-to-json-file", type=Path, metavar="FILE")
    le.add_argument("--partition", type=int)
    le.set_defaults(func=None, topic_fn=leader_election)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tierlog", description="Kafka-compatible tiered log broker")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the broker")
    s.add_argument("--config", type=Path, help="server.properties file")
    s.add_argument("--override", action="append", metavar="KEY=VALUE", help="repeatable")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    s.add_argument(
        "--debug",
        action="append",
        metavar="LOGGER",
        help="log this logger and its children at debug (repeatable), e.g. "
        "tierlog.server.txn.coordinator.transitions",
    )
    s.set_defaults(func=serve)

    t = sub.add_parser("topics", help="topic administration over the wire protocol")
    tsub = t.add_subparsers(dest="action", required=True)
    for name, fn in (
        ("create", topics_create),
        ("list", topics_list),
        ("describe", topics_describe),
        ("alter", topics_alter),
        ("alter-config", topics_alter_config),
        ("delete", topics_delete),
    ):
        sp = tsub.add_parser(name)
        sp.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        if name != "list":
            sp.add_argument("--topic", required=True)
        if name == "create":
            sp.add_argument("--partitions", type=int, default=-1)
            sp.add_argument("--replication-factor", type=int, default=-1)
            sp.add_argument("--config", action="append", metavar="KEY=VALUE")
        if name == "describe":
            sp.add_argument("--json", action="store_true")
            sp.add_argument(
                "--metrics-url",
                action="append",
                metavar="URL",
                help="a broker's metrics.listener (repeatable): the dirty ratio of a compacted "
                "topic's partitions is read from there",
            )
        if name == "alter":
            sp.add_argument("--partitions", type=int, required=True, help="the new count")
        if name == "alter-config":
            sp.add_argument("--set", action="append", metavar="KEY=VALUE")
            sp.add_argument("--delete", action="append", metavar="KEY")
        sp.set_defaults(func=None, topic_fn=fn)

    _add_cluster_admin(sub)

    r = sub.add_parser("remote", help="the remote tier, read from __remote_log_metadata")
    rsub = r.add_subparsers(dest="action", required=True)
    rs = rsub.add_parser("segments", help="remote segment metadata of a topic")
    rs.add_argument("topic")
    rs.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    rs.add_argument("--partition", type=int)
    rs.add_argument("--json", action="store_true")
    rs.set_defaults(func=None, topic_fn=remote_segments_cmd)

    d = sub.add_parser("dump-log", help="decode a segment or index file")
    d.add_argument("path", help=".log, .index, .timeindex, .txnindex, .snapshot, checkpoint")
    d.add_argument("--headers-only", action="store_true", help="batches only, not records")
    d.set_defaults(func=dump_log)

    k = sub.add_parser("keys", help="encryption key ring maintenance (object-store plugin)")
    ksub = k.add_subparsers(dest="action", required=True)
    ksub.add_parser(
        "rewrap",
        add_help=False,
        help="re-wrap segment data keys onto the active key (see `tierlog keys rewrap -h`)",
    )

    for name, what in (
        ("audit", "check the remote tier against its metadata (Spark job)"),
        ("usage", "local/remote bytes and cost per partition (Spark job)"),
    ):
        sub.add_parser(name, add_help=False, help=f"{what}; see `tierlog {name} -h`")

    o = sub.add_parser("docs", help="render docs/operations.md")
    o.add_argument("--output")
    o.set_defaults(func=docs)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["keys", "rewrap"]:  # its own options are parsed by the tool itself
        return keys_rewrap(argv[2:])
    if argv[:1] and argv[0] in SPARK_JOBS:  # their own options are parsed by the jobs
        return spark_job(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    if args.command in ("topics", "remote", "reassign-partitions", "leader-election"):
        try:
            client = WireConnection.to_bootstrap(args.bootstrap_server, client_id=CLIENT_ID)
        except OSError as e:
            print(f"tierlog: cannot reach {args.bootstrap_server}: {e}", file=sys.stderr)
            return 1
        with client:
            try:
                args.topic_fn(client, args)
            except ConnectionError as e:
                print(f"tierlog: connection to {args.bootstrap_server} lost: {e}", file=sys.stderr)
                return 1
        return 0
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
