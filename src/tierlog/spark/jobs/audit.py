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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from tierlog.spark.jobs.common import (
    add_common_args,
    error_exit,
    print_json,
    print_table,
    run_job,
)
from tierlog.spark.jobs.inventory import OBJECT_DDL, Inventory
from tierlog.spark.jobs.metadata import (
    SEGMENT_DDL,
    metadata_partitions,
    read_segments,
    segment_rows,
)
from tierlog.tiered.api import ObjectKind

DEFAULT_GRACE_MS = 60 * 60 * 1000
STUCK_STATES = ("COPY_SEGMENT_STARTED", "DELETE_SEGMENT_STARTED")


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


MANIFEST_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("base", pa.string()),
        ("log_size", pa.int64()),
        ("index_size", pa.int64()),
        ("error", pa.string()),
    ]
)
MANIFEST_DDL = "key string, base string, log_size long, index_size long, error string"


def check_manifests(inventory: Inventory) -> Callable[..., Iterator[pa.RecordBatch]]:
    """`mapInArrow` over manifest keys: fetch and parse each on the executors."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plugin = inventory.manifests
        assert plugin is not None
        for batch in batches:
            rows: list[dict[str, Any]] = []
            for key in batch.column("key").to_pylist():
                found = plugin.identify(key)
                base = None if found is None else found.segment_key
                row: dict[str, Any] = {"key": key, "base": base}
                try:
                    sizes = plugin.read_manifest(key).sizes
                    row.update(
                        log_size=sizes.get(ObjectKind.LOG),
                        index_size=sizes.get(ObjectKind.INDEX),
                    )
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"
                rows.append(row)
            yield pa.RecordBatch.from_pylist(rows, schema=MANIFEST_SCHEMA)

    return run


class _Findings:
    """The findings so far, added from collected Spark rows."""

    def __init__(self) -> None:
        self.found: list[Finding] = []

    def add(self, kind: str, rows: Iterable[Any], detail: Callable[[dict[str, Any]], str]) -> None:
        for r in rows:
            d = r.asDict()
            self.found.append(
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


def _metadata_rows(spark: Any, bootstrap: str, inventory: Inventory) -> Any:
    """One row per segment and one per user partition the metadata ever named (cached)."""
    n_meta = metadata_partitions(bootstrap)
    return (
        spark.range(0, n_meta, 1, max(n_meta, 1))
        .mapInArrow(read_segments(bootstrap, inventory, partition_rows=True), SEGMENT_DDL)
        .cache()
    )


def _unaccounted(findings: _Findings, joined: Any, known_topics: set[str]) -> None:
    """Objects no segment of the metadata accounts for: unrecognised when the plugin does
    not call them its own, foreign when their topic id is not this cluster's, else orphans."""
    from pyspark.sql import functions as F

    no_meta = joined.filter(F.col("segment_id").isNull()).collect()
    findings.add(
        "unrecognised",
        [r for r in no_meta if r["topic_id"] is None],
        lambda d: "not named like a segment object of this plugin; never deleted",
    )
    findings.add(
        "foreign",
        [r for r in no_meta if r["topic_id"] not in known_topics | {None}],
        lambda d: (
            f"segment object of topic id {d['topic_id']}, which this cluster's remote log "
            "metadata has never seen (another cluster sharing the prefix?); never deleted"
        ),
    )
    findings.add(
        "orphan",
        [r for r in no_meta if r["topic_id"] in known_topics],
        lambda d: "no remote log metadata for this segment",
    )


def _stuck(findings: _Findings, joined: Any, now_ms: int, grace_ms: int) -> None:
    """Objects of segments stuck in COPY_STARTED / DELETE_STARTED past the grace period."""
    from pyspark.sql import functions as F

    stuck = joined.filter(
        F.col("state").isin(*STUCK_STATES)
        & (F.col("event_timestamp_ms") < F.lit(now_ms - grace_ms))
    )
    findings.add(
        "orphan",
        stuck.collect(),
        lambda d: (
            f"segment stuck in {d['state']} for "
            f"{(now_ms - d['event_timestamp_ms']) // 1000} s (grace {grace_ms // 1000} s)"
        ),
    )


def _missing(findings: _Findings, objects: Any, finished: Any, inventory: Inventory) -> None:
    """Objects a COPY_FINISHED segment needs that the listing lacks. The listing came first,
    so a segment that finished uploading between the listing and the metadata read looks
    missing: the store is asked again for each one before it is reported."""
    from pyspark.sql import functions as F

    needed = finished.select("topic", "partition", "segment_id", F.explode("required").alias("key"))
    missing = needed.join(objects.select("key"), "key", "left_anti").collect()
    plugin = inventory.plugin
    missing = [r for r in missing if not plugin.has_object(r["key"])]
    findings.add("missing", missing, lambda d: "COPY_SEGMENT_FINISHED but not in the store")


def _manifest_sizes(spark: Any, findings: _Findings, objects: Any, inventory: Inventory) -> Any:
    """Sizes each readable manifest records, by segment (`base`, `log_size`, `index_size`);
    manifests that cannot be read are reported. None for a plugin without manifests."""
    from pyspark.sql import functions as F

    if inventory.manifests is None:
        return None
    manifests = (
        objects.filter(F.col("kind") == ObjectKind.MANIFEST.value)
        .select("key")
        .repartition(max(spark.sparkContext.defaultParallelism, 1))
        .mapInArrow(check_manifests(inventory), MANIFEST_DDL)
        .cache()
    )
    bad = manifests.filter(F.col("error").isNotNull())
    findings.add("bad_manifest", bad.collect(), lambda d: str(d["error"]))
    return manifests.filter(F.col("error").isNull()).select("base", "log_size", "index_size")


def _wrong_sizes(findings: _Findings, objects: Any, finished: Any, manifests: Any) -> None:
    """Objects of COPY_FINISHED segments whose stored size differs from what was recorded:
    by the manifest (its own size: the recorded total less the sizes it records), else by
    the segment metadata."""
    from pyspark.sql import functions as F

    present = objects.join(
        finished.select(
            "base",
            "topic",
            "partition",
            "segment_id",
            "stored_size",
            "md_log_size",
            "md_index_size",
            "md_manifest_size",
        ),
        "base",
    )
    if manifests is None:
        none = F.lit(None).cast("long")
        present = present.withColumn("log_size", none).withColumn("index_size", none)
    else:
        present = present.join(manifests, "base", "left")
    kind = F.col("kind")
    own = F.col("stored_size") - F.col("log_size") - F.col("index_size")
    recorded = (
        F.when(kind == ObjectKind.LOG.value, F.col("log_size"))
        .when(kind == ObjectKind.INDEX.value, F.col("index_size"))
        .when(kind == ObjectKind.MANIFEST.value, own)
    )
    implied = (
        F.when(kind == ObjectKind.LOG.value, F.col("md_log_size"))
        .when(kind == ObjectKind.INDEX.value, F.col("md_index_size"))
        .when(kind == ObjectKind.MANIFEST.value, F.col("md_manifest_size"))
    )
    expected = present.withColumn("expected_size", F.coalesce(recorded, implied)).withColumn(
        "against",
        F.when(recorded.isNull(), F.lit("segment metadata"))
        .when(kind == ObjectKind.MANIFEST.value, F.lit("custom metadata"))
        .otherwise(F.lit("manifest")),
    )
    wrong = expected.filter(
        F.col("expected_size").isNotNull() & (F.col("size") != F.col("expected_size"))
    )
    findings.add(
        "size_mismatch",
        wrong.collect(),
        lambda d: f"stored {d['size']} bytes, {d['against']} says {d['expected_size']}",
    )


def run_audit(
    spark: Any, bootstrap: str, inventory: Inventory, grace_ms: int, now_ms: int | None = None
) -> AuditReport:
    from pyspark.sql import functions as F

    listing = inventory.listing()  # first: see the module docstring
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    objects = spark.createDataFrame(inventory.object_rows(listing), OBJECT_DDL).cache()
    metadata_rows = _metadata_rows(spark, bootstrap, inventory)
    # every topic this cluster has tiered, deleted ones included: its objects are ours
    known_topics = {r["topic_id"] for r in metadata_rows.select("topic_id").distinct().collect()}
    segments = metadata_rows.filter(F.col("segment_id").isNotNull())
    finished = segments.filter(F.col("state") == "COPY_SEGMENT_FINISHED")
    findings = _Findings()

    seg_cols = segments.select(
        "base", "topic", "partition", "segment_id", "state", "event_timestamp_ms"
    )
    joined = objects.join(seg_cols, "base", "left")
    _unaccounted(findings, joined, known_topics)
    _stuck(findings, joined, now_ms, grace_ms)
    _missing(findings, objects, finished, inventory)
    _wrong_sizes(findings, objects, finished, _manifest_sizes(spark, findings, objects, inventory))

    n_segments = segments.count()
    metadata_rows.unpersist()
    objects.unpersist()
    return AuditReport(
        inventory.describe(),
        len(listing),
        sum(o.size for o in listing),
        n_segments,
        sorted(findings.found, key=lambda f: (f.kind, f.key)),
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
        inventory, report = run_job(
            args,
            "tierlog-audit",
            lambda spark, inv: run_audit(spark, args.bootstrap_server, inv, args.grace_period_ms),
        )
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
