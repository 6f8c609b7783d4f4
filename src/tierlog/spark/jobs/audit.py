"""`tierlog audit`: the remote log metadata joined with what the storage plugin holds.

Findings:
  * `orphan`: a segment object of a topic this cluster tiers that no metadata accounts
    for, or whose segment has been stuck in COPY_SEGMENT_STARTED / DELETE_SEGMENT_STARTED
    for longer than the grace period;
  * `foreign`: a segment object of a topic id this cluster's metadata has never seen (a
    bucket prefix shared with another cluster): reported, never deleted;
  * `unrecognised`: an object under the prefix not named like a segment object (other
    data in a shared bucket): reported, never deleted;
  * `missing`: an object a COPY_SEGMENT_FINISHED segment needs and the store lacks;
  * `size_mismatch`: an object whose stored size differs from what the manifest (or, for
    the manifest itself, the segment's custom metadata) recorded at upload; for the
    directory plugin, a `.log` file whose size differs from the segment's;
  * `bad_manifest`: a manifest that cannot be fetched or parsed.

The store is listed *before* the metadata is read. Every copy writes COPY_SEGMENT_STARTED
and waits for it to be durable before uploading a byte, so any object the listing saw has
its metadata already in the topic when we read it: an object reported as having no
metadata is not an upload in progress. The other way round, a segment that finished after
the listing would look missing, so each missing object is looked up again before it is
reported. Deleting orphans (`--delete-orphans`) is a dry run
unless `--yes` is given, and only ever deletes keys reported as orphans.

Exit status: 0 when the store is consistent, 2 when there are findings, 1 on errors.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from tierlog.spark.jobs.common import (
    add_common_args,
    discover,
    error_exit,
    print_json,
    print_table,
    rsm_overrides,
)
from tierlog.spark.jobs.inventory import Inventory
from tierlog.spark.jobs.metadata import (
    SEGMENT_DDL,
    metadata_partitions,
    read_segments,
    segment_rows,
)
from tierlog.spark.jobs.session import job_session

DEFAULT_GRACE_MS = 60 * 60 * 1000
STUCK_STATES = ("COPY_SEGMENT_STARTED", "DELETE_SEGMENT_STARTED")
MANIFEST_DDL = "key string, base string, log_size long, indexes_size long, error string"


@dataclass(frozen=True)
class Finding:
    kind: str  # orphan | foreign | unrecognised | missing | size_mismatch | bad_manifest
    key: str
    detail: str
    topic: str | None = None
    partition: int | None = None
    segment_id: str | None = None
    size: int | None = None
    expected_size: int | None = None
    state: str | None = None  # the segment's metadata state when the audit read it


@dataclass(frozen=True)
class AuditReport:
    store: str
    objects: int
    object_bytes: int
    segments: int
    findings: list[Finding]

    def count(self, kind: str) -> int:
        return sum(1 for f in self.findings if f.kind == kind)

    def summary(self) -> dict[str, int]:
        kinds = ("orphan", "foreign", "unrecognised", "missing", "size_mismatch", "bad_manifest")
        return {k: self.count(k) for k in kinds}


def check_manifests(inventory: Inventory) -> Callable[..., Iterator[pa.RecordBatch]]:
    """`mapInArrow` over manifest keys: fetch and parse each on the executors."""
    schema = pa.schema(
        [
            ("key", pa.string()),
            ("base", pa.string()),
            ("log_size", pa.int64()),
            ("indexes_size", pa.int64()),
            ("error", pa.string()),
        ]
    )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows: list[dict[str, Any]] = []
            for key in batch.column("key").to_pylist():
                row: dict[str, Any] = {"key": key, "base": inventory.segment_base(key)}
                try:
                    info = inventory.read_manifest(key)
                    row.update(log_size=info.log_size, indexes_size=info.indexes_size)
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"
                rows.append(row)
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return run


def run_audit(
    spark: Any, bootstrap: str, inventory: Inventory, grace_ms: int, now_ms: int | None = None
) -> AuditReport:
    from pyspark.sql import functions as F

    listing = inventory.listing()  # first: see the module docstring
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    objects = spark.createDataFrame(
        [(o.key, o.size, inventory.segment_base(o.key)) for o in listing],
        "key string, size long, base string",
    ).cache()
    n_meta = metadata_partitions(bootstrap)
    metadata_rows = (
        spark.range(0, n_meta, 1, max(n_meta, 1))
        .mapInArrow(read_segments(bootstrap, inventory, partition_rows=True), SEGMENT_DDL)
        .cache()
    )
    # every topic this cluster has tiered, deleted ones included: its objects are ours
    known_topics = {r["topic_id"] for r in metadata_rows.select("topic_id").distinct().collect()}
    segments = metadata_rows.filter(F.col("segment_id").isNotNull())
    findings: list[Finding] = []

    def add(kind: str, rows: list[Any], detail: Callable[[Any], str]) -> None:
        for r in rows:
            d = r.asDict()
            findings.append(
                Finding(
                    kind,
                    d["key"],
                    detail(d),
                    d.get("topic"),
                    d.get("partition"),
                    d.get("segment_id"),
                    d.get("size"),
                    d.get("expected_size"),
                    d.get("state"),
                )
            )

    seg_cols = segments.select(
        "base", "topic", "partition", "segment_id", "state", "event_timestamp_ms"
    )
    joined = objects.join(seg_cols, "base", "left")
    no_meta = joined.filter(F.col("segment_id").isNull()).collect()
    owners = {r["key"]: inventory.topic_id_of(r["key"]) for r in no_meta}
    add(
        "unrecognised",
        [r for r in no_meta if owners[r["key"]] is None],
        lambda d: "not named like a segment object of this plugin; never deleted",
    )
    add(
        "foreign",
        [r for r in no_meta if owners[r["key"]] not in known_topics | {None}],
        lambda d: (
            f"segment object of topic id {owners[d['key']]}, which this cluster's remote log "
            "metadata has never seen (another cluster sharing the prefix?); never deleted"
        ),
    )
    add(
        "orphan",
        [r for r in no_meta if owners[r["key"]] in known_topics],
        lambda d: "no remote log metadata for this segment",
    )
    stuck = joined.filter(
        F.col("state").isin(*STUCK_STATES)
        & (F.col("event_timestamp_ms") < F.lit(now_ms - grace_ms))
    )
    add(
        "orphan",
        stuck.collect(),
        lambda d: (
            f"segment stuck in {d['state']} for "
            f"{(now_ms - d['event_timestamp_ms']) // 1000} s (grace {grace_ms // 1000} s)"
        ),
    )

    finished = segments.filter(F.col("state") == "COPY_SEGMENT_FINISHED")
    needed = finished.select("topic", "partition", "segment_id", F.explode("required").alias("key"))
    missing = needed.join(objects.select("key"), "key", "left_anti").collect()
    # the listing came first, so a segment that finished uploading between the listing and
    # the metadata read looks missing: ask the store again for each one before saying so
    missing = [r for r in missing if not inventory.exists(r["key"])]
    add("missing", missing, lambda d: "COPY_SEGMENT_FINISHED but not in the store")

    present = objects.join(
        finished.select("base", "topic", "partition", "segment_id", "segment_size", "stored_size"),
        "base",
    )
    if inventory.kind == "objectstore":
        manifests = (
            objects.filter(F.col("key").endswith(".rsm-manifest"))
            .select("key")
            .repartition(max(spark.sparkContext.defaultParallelism, 1))
            .mapInArrow(check_manifests(inventory), MANIFEST_DDL)
            .cache()
        )
        bad = manifests.filter(F.col("error").isNotNull())
        add("bad_manifest", bad.collect(), lambda d: str(d["error"]))
        good = manifests.filter(F.col("error").isNull()).select("base", "log_size", "indexes_size")
        expected = (
            present.join(good, "base", "left")
            .withColumn(
                "expected_size",
                F.when(F.col("key").endswith(".log"), F.col("log_size"))
                .when(F.col("key").endswith(".indexes"), F.col("indexes_size"))
                .when(
                    F.col("key").endswith(".rsm-manifest"),
                    F.col("stored_size") - F.col("log_size") - F.col("indexes_size"),
                ),
            )
            .withColumn(
                "against",
                F.when(F.col("key").endswith(".rsm-manifest"), F.lit("custom metadata")).otherwise(
                    F.lit("manifest")
                ),
            )
        )
    else:
        expected = present.withColumn(
            "expected_size", F.when(F.col("key").endswith(".log"), F.col("segment_size"))
        ).withColumn("against", F.lit("segment metadata"))
    wrong = expected.filter(
        F.col("expected_size").isNotNull() & (F.col("size") != F.col("expected_size"))
    )
    add(
        "size_mismatch",
        wrong.collect(),
        lambda d: f"stored {d['size']} bytes, {d['against']} says {d['expected_size']}",
    )
    n_segments = segments.count()
    metadata_rows.unpersist()
    objects.unpersist()
    findings.sort(key=lambda f: (f.kind, f.key))
    return AuditReport(
        inventory.describe(),
        len(listing),
        sum(o.size for o in listing),
        n_segments,
        findings,
    )


def _progress(total: int, what: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """(advance, close) of a progress bar on stderr: rich when installed, else counts."""
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:
        done = [0]

        def step(n: int) -> None:
            done[0] += n
            print(f"{what}: {done[0]}/{total}", file=sys.stderr)

        return step, lambda: None
    progress = Progress(console=Console(stderr=True), transient=False)
    task = progress.add_task(what, total=total)
    progress.start()
    return (lambda n: progress.advance(task, n)), progress.stop


def current_states(bootstrap: str, inventory: Inventory) -> dict[str, str]:
    """Segment id -> metadata state now, read again on the driver (no Spark job)."""
    return {
        row["segment_id"]: row["state"]
        for p in range(metadata_partitions(bootstrap))
        for row in segment_rows(bootstrap, inventory, p)
    }


def delete_orphans(
    report: AuditReport,
    inventory: Inventory,
    execute: bool,
    states: Callable[[], Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Delete what the report calls orphans. Objects of a segment reported as stuck are
    deleted only if `states()` (the metadata read again, just before deleting) still
    shows it in the state it was stuck in: an upload slower than the grace period that
    finished meanwhile must keep its objects, or its COPY_SEGMENT_FINISHED would point at
    nothing once the broker deletes the local copy."""
    orphans = sorted(
        {f.key: f for f in report.findings if f.kind == "orphan"}.values(), key=lambda f: f.key
    )
    skipped = 0
    if execute and states is not None and any(f.segment_id for f in orphans):
        now = states()
        kept = [f for f in orphans if f.segment_id is None or now.get(f.segment_id) == f.state]
        skipped = len(orphans) - len(kept)
        orphans = kept
    total_bytes = sum(f.size or 0 for f in orphans)
    if not execute:
        return {"dry_run": True, "objects": len(orphans), "bytes": total_bytes, "deleted": 0}
    advance, close = _progress(len(orphans), "deleting orphans")
    try:
        inventory.delete([f.key for f in orphans], advance)
    finally:
        close()
    return {
        "dry_run": False,
        "objects": len(orphans),
        "bytes": total_bytes,
        "deleted": len(orphans),
        "skipped_changed_state": skipped,
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierlog audit",
        description="Check the remote tier against its metadata (a Spark job).",
    )
    add_common_args(p)
    p.add_argument(
        "--grace-period-ms",
        type=int,
        default=DEFAULT_GRACE_MS,
        help="how long a segment may stay in COPY_STARTED/DELETE_STARTED (default 1 h)",
    )
    p.add_argument(
        "--delete-orphans",
        action="store_true",
        help="delete orphan objects (a dry run unless --yes is also given)",
    )
    p.add_argument("--yes", action="store_true", help="really delete with --delete-orphans")
    return p


def audit_main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        inventory = discover(args.bootstrap_server, args.rsm_class, rsm_overrides(args.rsm_config))
        spark, created = job_session("tierlog-audit", args.master)
        try:
            report = run_audit(spark, args.bootstrap_server, inventory, args.grace_period_ms)
        finally:
            if created:
                spark.stop()
    except Exception as exc:
        return error_exit("audit", exc)
    deletion = None
    if args.delete_orphans:
        deletion = delete_orphans(
            report, inventory, args.yes, lambda: current_states(args.bootstrap_server, inventory)
        )
    if args.json:
        print_json(
            {
                "store": report.store,
                "objects": report.objects,
                "object_bytes": report.object_bytes,
                "segments": report.segments,
                "summary": report.summary(),
                "findings": [asdict(f) for f in report.findings],
                "delete_orphans": deletion,
            }
        )
    else:
        print(
            f"audited {report.store}: {report.objects} objects ({report.object_bytes} bytes), "
            f"{report.segments} segments in the metadata"
        )
        if report.findings:
            print_table(
                "findings",
                ("kind", "key", "topic", "partition", "detail"),
                [(f.kind, f.key, f.topic, f.partition, f.detail) for f in report.findings],
            )
        print("summary: " + ", ".join(f"{k}={v}" for k, v in report.summary().items()))
        if deletion is not None:
            if deletion["dry_run"]:
                print(
                    f"dry run: would delete {deletion['objects']} orphan objects "
                    f"({deletion['bytes']} bytes); add --yes to delete them"
                )
            else:
                print(f"deleted {deletion['deleted']} orphan objects ({deletion['bytes']} bytes)")
                if deletion["skipped_changed_state"]:
                    print(
                        f"kept the objects of {deletion['skipped_changed_state']} reported "
                        "orphans: their segment's state changed since the audit read it"
                    )
    return 2 if report.findings else 0
