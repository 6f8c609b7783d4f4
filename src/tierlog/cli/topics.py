"""``tierlog topics create|list|describe|alter|alter-config|delete``: Kafka's
``kafka-topics.sh`` as a wire client (CreateTopics, Metadata, ListOffsets, DescribeConfigs,
IncrementalAlterConfigs, CreatePartitions, DeleteTopics)."""

from __future__ import annotations

import argparse
import json
import urllib.request
from collections.abc import Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tierlog.cli.common import CLIENT_ID, check, kv, on_controller, supports
from tierlog.client import BrokerConnections, ListedOffset, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType
from tierlog.protocol.errors import ErrorCode
from tierlog.server.log_cleaner import DIRTY_RATIO_METRIC


def topics_create(c: WireConnection, a: argparse.Namespace) -> None:
    def create(conn: WireConnection) -> tuple[int, str | None]:
        return conn.create_topic(
            a.topic, a.partitions, kv(a.config), replication_factor=a.replication_factor
        )

    code, message = on_controller(c, create, lambda r: r[0])
    check(code, message, f"create {a.topic}")
    print(f"Created topic {a.topic}.")


def topics_list(c: WireConnection, a: argparse.Namespace) -> None:
    r = c.call(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False)
    for t in sorted(r.topics, key=lambda t: t.name or ""):
        print(t.name)


def describe(c: WireConnection, topic: str) -> dict[str, Any]:
    md = c.call(ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
    t = md.topics[0]
    check(t.error_code, None, f"describe {topic}")
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
            if version > 7 and not supports(c, ApiKey.LIST_OFFSETS, version):
                for p in parts:
                    offsets[p][key] = None
                continue
            for index, answer in leaders.list_offsets(topic, parts, ts, version, by_index).items():
                check(answer.error_code, None, f"list offsets {topic}-{index}")
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
    check(res.error_code, res.error_message, f"describe configs {topic}")
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


def topics_alter_config(c: WireConnection, a: argparse.Namespace) -> None:
    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in kv(a.set).items()]
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
    check(res.error_code, res.error_message, f"alter {a.topic}")
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

    r = on_controller(c, grow, lambda r: int(r.results[0].error_code))
    res = r.results[0]
    check(res.error_code, res.error_message, f"alter {a.topic}")
    print(f"Increased the partition count of {a.topic} to {a.partitions}.")


def topics_delete(c: WireConnection, a: argparse.Namespace) -> None:
    def delete(conn: WireConnection) -> Any:
        return conn.call(ApiKey.DELETE_TOPICS, 5, topic_names=[a.topic], timeout=30_000)

    r = on_controller(c, delete, lambda r: int(r.responses[0].error_code))
    res = r.responses[0]
    check(res.error_code, res.error_message, f"delete {a.topic}")
    print(f"Deleted topic {a.topic}.")


def register(sub: Any) -> None:
    """The ``topics`` command and its actions."""
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
        sp.set_defaults(func=None, wire_fn=fn)
