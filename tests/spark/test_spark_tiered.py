"""The `tierlog` source and the audit/usage jobs against a real tiering broker.

One `tierlog serve` with the object-store plugin over a `file://` bucket, chunked,
zstd-compressed and AES-encrypted. The private key is never disclosed by the broker: jobs
pass it as `tierlog.rsm.config.*` / `--rsm-config`. A 4-partition topic gets records with
keys, values, headers and explicit timestamps in every codec, small segments and
`local.retention.bytes=1`, so about 90% of it ends up in the bucket only.

The tests run in file order and share the broker: the last one stops it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker import BrokerProcess
from tests.helpers.object_stores import write_rsa_key_pair
from tests.helpers.poll import wait_until
from tests.helpers.wire import EARLIEST_LOCAL, LATEST_TIERED
from tierlog.spark.driver import Catalog
from tierlog.spark.jobs import audit_main, usage_main
from tierlog.spark.options import parse_source_options
from tierlog.spark.source import SlicePartition, TierlogBatchReader
from tierlog.spark.wire import BrokerClient
from tierlog.storage.objectstore.layout import kafka_uuid

pytestmark = pytest.mark.spark

TOPIC = "tiered"
AUDITED = "audited"
PARTS = 4
N = 4000
TAIL = 300  # produced after tiering settled: the hot tail, read through the broker
T0 = int(time.time() * 1000) - 3_600_000  # recent: older records would meet time retention
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@dataclass
class Tiered:
    broker: BrokerProcess
    bucket: Path
    secrets: dict[str, str]  # rsm.config keys the broker does not disclose

    def options(self) -> dict[str, str]:
        return {f"tierlog.rsm.config.{k}": v for k, v in self.secrets.items()}

    def rsm_args(self) -> list[str]:
        return [a for k, v in self.secrets.items() for a in ("--rsm-config", f"{k}={v}")]


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tiered]:
    root = tmp_path_factory.mktemp("tiered-spark")
    bucket = root / "bucket"
    bucket.mkdir()
    keys = write_rsa_key_pair(root, "k1")
    b = BrokerProcess(
        root / "broker",
        {
            "remote.log.storage.manager.class.name": "objectstore",
            "rsm.config.storage.url": bucket.as_uri(),
            "rsm.config.chunk.size": "16384",
            "rsm.config.compression.enabled": "true",
            "rsm.config.encryption.enabled": "true",
            "rsm.config.encryption.key.pair.id": "k1",
            "rsm.config.encryption.key.pairs": "k1",
            "rsm.config.encryption.key.pairs.k1.public.key.file": str(keys.public),
            "rsm.config.encryption.key.pairs.k1.private.key.file": str(keys.private),
            "remote.log.manager.task.interval.ms": "300",
            "log.retention.check.interval.ms": "300",
            "log.segment.delete.delay.ms": "0",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        },
    )
    b.start()
    secrets = {"encryption.key.pairs.k1.private.key.file": str(keys.private)}
    yield Tiered(b, bucket, secrets)
    b.close()


def create_tiered_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(
        name,
        PARTS,
        1,
        config={
            "remote.storage.enable": "true",
            "segment.bytes": "4096",
            "local.retention.bytes": "1",
        },
    )
    for f in admin.create_topics([topic]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, n: int, first: int = 0) -> list[dict[str, Any]]:
    """Records first <= i < first + n, in blocks of 40 that cycle through the codecs (so
    every segment mixes them); returns them with the offsets the broker assigned."""
    producers = [
        Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": "5",
                "batch.size": "4000",
            }
        )
        for codec in CODECS
    ]
    out: list[dict[str, Any]] = []
    for block in range(first, first + n, 40):
        c = (block // 40) % len(CODECS)
        p = producers[c]
        for i in range(block, min(block + 40, first + n)):
            rec: dict[str, Any] = {
                "key": None if i % 10 == 0 else f"key-{i}".encode(),
                "value": f"value-{i}-".encode() * (1 + i % 5),
                "partition": i % PARTS,
                "timestamp": T0 + i,
                "headers": [("i", str(i).encode()), ("codec", CODECS[c].encode())]
                if i % 3
                else None,
            }

            def delivered(err: Any, msg: Any, rec: dict[str, Any] = rec) -> None:
                assert err is None, err
                rec["offset"] = msg.offset()

            p.produce(
                topic,
                value=rec["value"],
                key=rec["key"],
                partition=rec["partition"],
                timestamp=rec["timestamp"],
                headers=rec["headers"],
                on_delivery=delivered,
            )
            out.append(rec)
        assert p.flush(30) == 0
    return out


def offsets(bootstrap: str, topic: str, spec: int) -> dict[int, int]:
    with BrokerClient(bootstrap) as c:
        found = c.list_offsets({(topic, p): spec for p in range(PARTS)})
    return {tp[1]: off for tp, (off, _) in found.items()}


def wait_mostly_remote(
    bootstrap: str, topic: str, ends: dict[int, int], fraction: float = 0.85
) -> dict[int, int]:
    """Wait until `fraction` of every partition is in the bucket only; returns the first
    local offset per partition (everything below it is remote)."""

    def settled() -> dict[int, int]:
        local, tiered = (
            offsets(bootstrap, topic, EARLIEST_LOCAL),
            offsets(bootstrap, topic, LATEST_TIERED),
        )
        ok = all(tiered[p] == local[p] - 1 and local[p] >= fraction * ends[p] for p in range(PARTS))
        return local if ok else {}

    found: dict[int, int] = wait_until(settled, 60, 0.2, what=f"{topic} mostly tiered")
    return found


@pytest.fixture(scope="module")
def history(tiered: Tiered) -> tuple[list[dict[str, Any]], dict[int, int]]:
    bootstrap = tiered.broker.bootstrap
    create_tiered_topic(bootstrap, TOPIC)
    recs = produce(bootstrap, TOPIC, N - TAIL)
    ends = offsets(bootstrap, TOPIC, -1)
    assert sum(ends.values()) == N - TAIL
    wait_mostly_remote(bootstrap, TOPIC, ends)
    recs += produce(bootstrap, TOPIC, TAIL, first=N - TAIL)
    # The tail rolls segments of its own, which get tiered too. Wait until only the active
    # segment is local and everything before it is in the bucket: from then on the plan a
    # Spark job makes (cold slices from the bucket, the rest from the broker) cannot go
    # stale while it runs, so the broker serving no remote read is a real check.
    ends = offsets(bootstrap, TOPIC, -1)
    wait_until(
        lambda: all(_local_segments(tiered, TOPIC, p) == 1 for p in range(PARTS)),
        60,
        0.2,
        what=f"{TOPIC} down to its active segments",
    )
    return recs, wait_mostly_remote(bootstrap, TOPIC, ends, fraction=0.8)


def _local_segments(tiered: Tiered, topic: str, partition: int) -> int:
    return len(list((tiered.broker.log_dir / f"{topic}-{partition}").glob("*.log")))


def as_row(r: dict[str, Any]) -> tuple[Any, ...]:
    ts = dt.datetime.fromtimestamp(r["timestamp"] / 1000, dt.UTC).replace(tzinfo=None)
    headers = tuple(r["headers"]) if r["headers"] else None
    return (r["partition"], r["offset"], r["key"], r["value"], ts, 0, headers)


def collected(df: Any) -> list[tuple[Any, ...]]:
    out = []
    for r in df.collect():
        headers = (
            tuple((h["key"], bytes(h["value"])) for h in r["headers"]) if r["headers"] else None
        )
        key = bytes(r["key"]) if r["key"] is not None else None
        out.append(
            (
                r["partition"],
                r["offset"],
                key,
                bytes(r["value"]),
                r["timestamp"],
                r["timestampType"],
                headers,
            )
        )
    return sorted(out, key=lambda t: (t[0], t[1]))


def remote_fetches(tiered: Tiered, topic: str) -> float:
    """Remote reads the broker served for `topic` (its RemoteLogManager's counter)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(tiered.broker.metrics_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "tierlog_remote_fetch_requests_total" and s.labels.get("topic") == topic
    )


def test_broker_discloses_non_secret_remote_settings(tiered: Tiered) -> None:
    with BrokerClient(tiered.broker.bootstrap) as c:
        configs = c.broker_configs()
    assert configs["rsm.config.storage.url"] == tiered.bucket.as_uri()
    assert configs["rsm.config.chunk.size"] == "16384"
    assert configs["rsm.config.encryption.enabled"] == "true"
    assert configs["rsm.config.encryption.key.pairs.k1.public.key.file"]
    assert "rsm.config.encryption.key.pairs.k1.private.key.file" in configs
    assert configs["rsm.config.encryption.key.pairs.k1.private.key.file"] is None


def test_batch_read_of_a_mostly_tiered_topic_equals_what_was_produced(
    spark: Any, tiered: Tiered, history: tuple[list[dict[str, Any]], dict[int, int]]
) -> None:
    recs, local_start = history
    assert sum(local_start.values()) >= 0.8 * N  # ~90% of the records are remote only
    before = remote_fetches(tiered, TOPIC)
    df = (
        spark.read.format("tierlog")
        .option("kafka.bootstrap.servers", tiered.broker.bootstrap)
        .option("subscribe", TOPIC)
        .option("includeHeaders", "true")
        .options(**tiered.options())
        .load()
    )
    got = collected(df)
    assert len(got) == N
    assert got == sorted((as_row(r) for r in recs), key=lambda t: (t[0], t[1]))
    # the cold part was planned for the bucket, and the broker served no remote read of it
    assert remote_fetches(tiered, TOPIC) == before
    opts = parse_source_options(
        {"kafka.bootstrap.servers": tiered.broker.bootstrap, "subscribe": TOPIC},
        streaming=False,
    )
    parts = TierlogBatchReader(opts).partitions()
    planned = [s for p in parts if isinstance(p, SlicePartition) for s in p.slices]
    assert len(parts) == len({id(p) for p in parts if isinstance(p, SlicePartition)})
    assert sum(s.end - s.start for s in planned if s.segment is not None) >= 0.8 * N


def _segment_keys(bucket: Path, topic: str) -> list[Path]:
    return sorted(p for p in bucket.rglob("*.log") if p.parent.parent.name.startswith(topic + "-"))


def test_audit_finds_orphan_missing_and_truncated_objects(
    spark: Any, tiered: Tiered, request: pytest.FixtureRequest
) -> None:
    bootstrap = tiered.broker.bootstrap
    create_tiered_topic(bootstrap, AUDITED)
    ends_list = produce(bootstrap, AUDITED, 1200)
    ends = offsets(bootstrap, AUDITED, -1)
    assert sum(ends.values()) == len(ends_list)
    wait_mostly_remote(bootstrap, AUDITED, ends, fraction=0.5)

    def audit(*extra: str) -> tuple[int, dict[str, Any]]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = audit_main(
                ["--bootstrap-server", bootstrap, "--json", *tiered.rsm_args(), *extra]
            )
        return code, json.loads(out.getvalue())

    code, clean = audit()
    assert code == 0, clean["findings"]
    assert set(clean["summary"].values()) == {0}
    assert {"orphan", "foreign", "unrecognised", "missing"} <= set(clean["summary"])

    logs = _segment_keys(tiered.bucket, AUDITED)
    assert len(logs) >= 4
    orphan = logs[0].with_name("00000000000000999999-AAAAAAAAAAAAAAAAAAAAAA.log")
    orphan.write_bytes(b"left behind by a crashed upload")
    deleted = logs[1].with_suffix(".indexes")
    deleted.unlink()
    truncated = logs[2]
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    # a shared bucket: other data, and a segment of a topic another cluster tiers here
    unrelated = tiered.bucket / "exports" / "2026-11.csv"
    unrelated.parent.mkdir()
    unrelated.write_bytes(b"not ours")
    other_cluster = (
        tiered.bucket
        / f"{AUDITED}-{kafka_uuid(uuid.uuid4())}"
        / "0"
        / f"{0:020d}-{kafka_uuid(uuid.uuid4())}.log"
    )
    other_cluster.parent.mkdir(parents=True)
    other_cluster.write_bytes(b"another cluster's segment")
    request.addfinalizer(lambda: shutil.rmtree(unrelated.parent))
    request.addfinalizer(lambda: shutil.rmtree(other_cluster.parent.parent))
    # a topic of ours, deleted: its metadata ends with the partition-delete records, and an
    # object left behind (an upload that outlived the deletion) is still ours to delete
    create_tiered_topic(bootstrap, "gone")
    produce(bootstrap, "gone", 600)
    wait_until(lambda: _segment_keys(tiered.bucket, "gone"), what="a segment uploaded")
    gone_dir = _segment_keys(tiered.bucket, "gone")[0].parent
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics(["gone"]).values():
        f.result(30)
    wait_until(lambda: not _segment_keys(tiered.bucket, "gone"), what="remote deleted")
    left_behind = gone_dir / f"{0:020d}-{kafka_uuid(uuid.uuid4())}.log"
    gone_dir.mkdir(parents=True, exist_ok=True)
    left_behind.write_bytes(b"uploaded after the topic was deleted")

    def rel(p: Path) -> str:
        return p.relative_to(tiered.bucket).as_posix()

    code, report = audit()
    assert code == 2
    kinds = {(f["kind"], f["key"]) for f in report["findings"]}
    assert kinds == {
        ("orphan", rel(orphan)),
        ("orphan", rel(left_behind)),
        ("unrecognised", rel(unrelated)),
        ("foreign", rel(other_cluster)),
        ("missing", rel(deleted)),
        ("size_mismatch", rel(truncated)),
    }
    assert report["delete_orphans"] is None

    code, dry = audit("--delete-orphans")
    assert dry["delete_orphans"] == {
        "dry_run": True,
        "objects": 2,
        "bytes": len(b"left behind by a crashed upload")
        + len(b"uploaded after the topic was deleted"),
        "deleted": 0,
    }
    assert orphan.exists()

    before = {p: p.stat().st_size for p in tiered.bucket.rglob("*") if p.is_file()}
    code, done = audit("--delete-orphans", "--yes")
    assert done["delete_orphans"]["deleted"] == 2
    after = {p: p.stat().st_size for p in tiered.bucket.rglob("*") if p.is_file()}
    assert set(before) - set(after) == {orphan, left_behind}  # only the orphans are gone
    assert all(after[p] == before[p] for p in after)

    assert unrelated.exists() and other_cluster.exists()  # never ours to delete

    code, last = audit()
    assert {f["kind"] for f in last["findings"]} == {
        "missing",
        "size_mismatch",
        "unrecognised",
        "foreign",
    }


def test_usage_reports_remote_and_local_bytes_per_partition(
    spark: Any, tiered: Tiered, history: tuple[list[dict[str, Any]], dict[int, int]]
) -> None:
    _, local_start = history
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = usage_main(
            [
                "--bootstrap-server",
                tiered.broker.bootstrap,
                "--json",
                "--price-per-gib",
                "1024",
                "--metrics-url",
                tiered.broker.metrics_url,
                *tiered.rsm_args(),
            ]
        )
    assert code == 0
    doc = json.loads(out.getvalue())
    rows = {r["partition"]: r for r in doc["partitions"] if r["topic"] == TOPIC}
    assert sorted(rows) == list(range(PARTS))
    stored = {p: 0 for p in range(PARTS)}
    for f in tiered.bucket.rglob("*"):
        if f.is_file() and f.parent.parent.name.startswith(TOPIC + "-"):
            stored[int(f.parent.name)] += f.stat().st_size
    for p, r in rows.items():
        assert r["remote_stored_bytes"] == stored[p]
        assert r["remote_logical_bytes"] > 0
        assert r["segments"]["copy_segment_finished"] >= 4
        assert r["local_bytes"] is not None and r["local_bytes"] > 0
        assert r["remote_end_offset"] >= local_start[p] - 1
        assert r["oldest_remote_timestamp"] <= r["newest_remote_timestamp"]
        assert r["monthly_cost"] == pytest.approx(stored[p] / 1024**3 * 1024, rel=1e-3)


def bucket_options(tiered: Tiered, bootstrap: str) -> dict[str, str]:
    """A job that names the plugin's settings itself: with the broker down (`bootstrap`
    does not answer) it plans from the bucket's manifests."""
    public = Path(tiered.secrets["encryption.key.pairs.k1.private.key.file"]).with_name(
        "k1-public.pem"
    )
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": TOPIC,
        "includeHeaders": "true",
        "tierlog.rsm.config.storage.url": tiered.bucket.as_uri(),
        "tierlog.rsm.config.encryption.key.pair.id": "k1",
        "tierlog.rsm.config.encryption.key.pairs": "k1",
        "tierlog.rsm.config.encryption.key.pairs.k1.public.key.file": str(public),
        **tiered.options(),
    }


def test_batch_read_of_a_remote_range_with_the_broker_stopped(
    spark: Any, tiered: Tiered, history: tuple[list[dict[str, Any]], dict[int, int]]
) -> None:
    recs, local_start = history
    bootstrap = tiered.broker.bootstrap
    tiered.broker.stop()  # its exit code is the broker's business, not this test's
    assert not tiered.broker.running
    start = {p: 5 + p for p in range(PARTS)}
    end = {p: local_start[p] - 3 for p in range(PARTS)}
    df = (
        spark.read.format("tierlog")
        .options(**bucket_options(tiered, bootstrap))
        .option("startingOffsets", json.dumps({TOPIC: {str(p): o for p, o in start.items()}}))
        .option("endingOffsets", json.dumps({TOPIC: {str(p): o for p, o in end.items()}}))
        .load()
    )
    got = collected(df)
    want = sorted(
        (as_row(r) for r in recs if start[r["partition"]] <= r["offset"] < end[r["partition"]]),
        key=lambda t: (t[0], t[1]),
    )
    assert len(want) >= 0.8 * N
    assert got == want


def test_timestamp_bounds_with_the_broker_stopped_follow_list_offsets(
    spark: Any, tiered: Tiered, history: tuple[list[dict[str, Any]], dict[int, int]]
) -> None:
    """With the broker stopped, startingOffsetsByTimestamp / endingTimestamp are
    resolved from the bucket (segment metadata, remote time indexes, batches) and mean what
    ListOffsets means: the first offset whose timestamp is >= the target."""
    recs, _ = history
    if tiered.broker.running:  # run alone, not after the test above
        tiered.broker.stop()
    by_partition: dict[int, list[dict[str, Any]]] = {}
    for r in sorted(recs, key=lambda r: r["offset"]):
        by_partition.setdefault(r["partition"], []).append(r)

    def first_at_or_after(p: int, ts: int) -> int:
        return int(next(r["offset"] for r in by_partition[p] if r["timestamp"] >= ts))

    starting = {p: T0 + 101 + 37 * p for p in range(PARTS)}
    ending = T0 + 2_000
    opts = {
        **bucket_options(tiered, tiered.broker.bootstrap),
        "startingOffsetsByTimestamp": json.dumps({TOPIC: {str(p): t for p, t in starting.items()}}),
        "endingTimestamp": str(ending),
    }
    start = {p: first_at_or_after(p, t) for p, t in starting.items()}
    end = {p: first_at_or_after(p, ending) for p in range(PARTS)}
    parsed = parse_source_options(opts, streaming=False)
    with Catalog(parsed) as c:
        views = c.views()
        assert c.offline  # planned from the bucket
        assert c.resolve(parsed.starting, views, "starting") == {
            (TOPIC, p): o for p, o in start.items()
        }
        assert c.resolve(parsed.ending, views, "ending") == {(TOPIC, p): o for p, o in end.items()}
    got = collected(spark.read.format("tierlog").options(**opts).load())
    want = sorted(
        (as_row(r) for r in recs if start[r["partition"]] <= r["offset"] < end[r["partition"]]),
        key=lambda t: (t[0], t[1]),
    )
    assert len(want) >= 1_500
    assert got == want
