"""`tierlog usage`: what each topic partition occupies, locally and in the remote tier.

Per partition: local bytes (the broker's `tierlog_log_size_bytes` gauge, when its metrics
endpoint is known) and local offsets, remote bytes both logical (segment sizes from the
metadata) and stored (the objects actually listed, i.e. after the plugin's compression and
encryption), segment counts per metadata state, the oldest and newest remote segment max
timestamps, and the estimated monthly storage cost of the stored bytes at `--price-per-gib`.
A Spark job: the metadata is materialized by one task per metadata partition and joined
with the store listing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import urllib.request
from collections.abc import Sequence
from typing import Any

from tierlog.spark.jobs.common import (
    add_common_args,
    error_exit,
    print_json,
    print_table,
    run_job,
)
from tierlog.spark.jobs.inventory import OBJECT_DDL, Inventory
from tierlog.spark.jobs.metadata import SEGMENT_DDL, metadata_partitions, read_segments
from tierlog.spark.wire import BrokerClient
from tierlog.tiered.metadata import METADATA_TOPIC

GiB = 1 << 30
DEFAULT_PRICE = 0.023  # $/GiB-month, S3 Standard's first tier
STATES = (
    "COPY_SEGMENT_STARTED",
    "COPY_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
)
LocalKey = tuple[str, int]


def local_sizes(metrics_url: str | None) -> dict[LocalKey, int]:
    """Local bytes per partition from the broker's Prometheus endpoint ({} if unknown)."""
    if not metrics_url:
        return {}
    from prometheus_client.parser import text_string_to_metric_families

    url = metrics_url.rstrip("/")
    if not url.endswith("/metrics"):
        url += "/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict[LocalKey, int] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "tierlog_log_size_bytes":
                out[(s.labels["topic"], int(s.labels["partition"]))] = int(s.value)
    return out


def local_offsets(bootstrap: str) -> dict[LocalKey, tuple[int, int, int]]:
    """(log start, local log start, end) per user partition."""
    with BrokerClient(bootstrap) as client:
        topics = {n: t for n, t in client.metadata().items() if not t.internal}
        tps = [(n, p) for n, t in topics.items() for p in t.leaders if n != METADATA_TOPIC]
        if not tps:
            return {}
        start = client.list_offsets(dict.fromkeys(tps, -2))
        local = client.list_offsets(dict.fromkeys(tps, -4))
        end = client.list_offsets(dict.fromkeys(tps, -1))
    return {tp: (start[tp][0], local[tp][0], end[tp][0]) for tp in tps}


def _iso(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")


def run_usage(
    spark: Any,
    bootstrap: str,
    inventory: Inventory,
    price_per_gib: float,
    metrics_url: str | None = None,
) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    objects = spark.createDataFrame(inventory.object_rows(inventory.listing()), OBJECT_DDL)
    n_meta = metadata_partitions(bootstrap)
    segments = spark.range(0, n_meta, 1, max(n_meta, 1)).mapInArrow(
        read_segments(bootstrap, inventory), SEGMENT_DDL
    )
    stored = objects.groupBy("base").agg(F.sum("size").alias("stored"))
    finished = F.col("state") == "COPY_SEGMENT_FINISHED"
    per_partition = (
        segments.join(stored, "base", "left")
        .groupBy("topic", "partition")
        .agg(
            F.sum(F.when(finished, F.col("segment_size")).otherwise(0)).alias("remote_logical"),
            F.sum(F.when(finished, F.coalesce("stored", F.lit(0))).otherwise(0)).alias(
                "remote_stored"
            ),
            *(F.sum(F.when(F.col("state") == s, 1).otherwise(0)).alias(s) for s in STATES),
            F.min(F.when(finished, F.col("max_timestamp_ms"))).alias("oldest"),
            F.max(F.when(finished, F.col("max_timestamp_ms"))).alias("newest"),
            F.min(F.when(finished, F.col("start_offset"))).alias("remote_start"),
            F.max(F.when(finished, F.col("end_offset"))).alias("remote_end"),
        )
        .collect()
    )
    remote = {(r["topic"], r["partition"]): r.asDict() for r in per_partition}
    sizes = local_sizes(metrics_url)
    offsets = local_offsets(bootstrap)
    rows: list[dict[str, Any]] = []
    for tp in sorted(set(remote) | set(offsets)):
        r = remote.get(tp, {})
        log_start, local_start, end = offsets.get(tp, (None, None, None))
        remote_stored = int(r.get("remote_stored") or 0)
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "local_bytes": sizes.get(tp),
                "log_start_offset": log_start,
                "local_log_start_offset": local_start,
                "log_end_offset": end,
                "remote_logical_bytes": int(r.get("remote_logical") or 0),
                "remote_stored_bytes": remote_stored,
                "segments": {s.lower(): int(r.get(s) or 0) for s in STATES},
                "remote_start_offset": r.get("remote_start"),
                "remote_end_offset": r.get("remote_end"),
                "oldest_remote_timestamp": _iso(r.get("oldest")),
                "newest_remote_timestamp": _iso(r.get("newest")),
                "monthly_cost": round(remote_stored / GiB * price_per_gib, 6),
            }
        )
    return rows


def _metrics_url(bootstrap: str, given: str | None) -> str | None:
    """The given URL, else the broker's `metrics.listener` when it names a fixed port."""
    if given:
        return given
    try:
        with BrokerClient(bootstrap) as client:
            url = client.broker_configs().get("metrics.listener")
    except Exception:
        return None
    if not url or url.rstrip("/").endswith(":0"):
        return None
    return url.replace("0.0.0.0", "127.0.0.1")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierlog usage",
        description="Local and remote storage per topic partition, with cost (a Spark job).",
    )
    add_common_args(p)
    p.add_argument(
        "--price-per-gib",
        type=float,
        default=DEFAULT_PRICE,
        help=f"storage price in $ per GiB-month (default {DEFAULT_PRICE})",
    )
    p.add_argument("--metrics-url", help="broker metrics endpoint (default: from its config)")
    return p


def usage_main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        inventory, rows = run_job(
            args,
            "tierlog-usage",
            lambda spark, inv: run_usage(
                spark,
                args.bootstrap_server,
                inv,
                args.price_per_gib,
                _metrics_url(args.bootstrap_server, args.metrics_url),
            ),
        )
    except Exception as exc:
        return error_exit("usage", exc)
    if args.json:
        print_json(
            {
                "store": inventory.describe(),
                "price_per_gib_month": args.price_per_gib,
                "partitions": rows,
                "total_monthly_cost": round(sum(r["monthly_cost"] for r in rows), 6),
            }
        )
        return 0
    print_table(
        f"usage of {inventory.describe()} at ${args.price_per_gib}/GiB-month",
        (
            "topic",
            "part",
            "local B",
            "remote B",
            "stored B",
            "copying",
            "finished",
            "deleting",
            "oldest remote",
            "newest remote",
            "$/month",
        ),
        [
            (
                r["topic"],
                r["partition"],
                r["local_bytes"],
                r["remote_logical_bytes"],
                r["remote_stored_bytes"],
                r["segments"]["copy_segment_started"],
                r["segments"]["copy_segment_finished"],
                r["segments"]["delete_segment_started"],
                r["oldest_remote_timestamp"],
                r["newest_remote_timestamp"],
                f"{r['monthly_cost']:.4f}",
            )
            for r in rows
        ],
    )
    return 0
