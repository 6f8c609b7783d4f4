"""The examples run against a real broker, in the shared Spark session: the backfill job and
the per-minute streaming count."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOUR = 3_600_000
MINUTE = 60_000


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_backfill_example_writes_every_record_and_hourly_counts(
    spark: Any, broker: str, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic("backfilled", 2, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker, "linger.ms": "5"})
    base = 1_800_000_000_000 // HOUR * HOUR  # records spread over 3 hours
    for i in range(600):
        p.produce(
            "backfilled",
            value=b"x" * (i % 7),
            key=b"k%d" % (i % 11),
            partition=i % 2,
            timestamp=base + (i // 200) * HOUR + i,
        )
    assert p.flush(30) == 0

    code = load("backfill").main(
        ["--bootstrap-server", broker, "--topic", "backfilled", "--output", str(tmp_path)]
    )
    assert code == 0
    records = spark.read.parquet(str(tmp_path / "records"))
    assert records.count() == 600
    assert records.select("partition", "offset").distinct().count() == 600
    hourly = spark.read.parquet(str(tmp_path / "hourly")).collect()
    assert len(hourly) == 3 * 2
    assert sum(r["records"] for r in hourly) == 600
    assert sum(r["value_bytes"] for r in hourly) == sum(i % 7 for i in range(600))


def test_streaming_example_counts_each_closed_minute_exactly(
    spark: Any, broker: str, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic("streamed", 2, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker, "linger.ms": "5"})
    base = 1_800_000_000_000 // MINUTE * MINUTE
    produced: dict[int, tuple[int, int]] = {}  # minute start ms -> (records, value bytes)
    for i in range(400):  # in time order, 100 per minute, as a live topic receives them
        ts = base + i * 600
        minute = ts // MINUTE * MINUTE
        value = b"v" * (i % 9)
        p.produce("streamed", value=value, partition=i % 2, timestamp=ts)
        n, size = produced.get(minute, (0, 0))
        produced[minute] = (n + 1, size + len(value))
    # one later record moves the watermark (max event time - 1 minute) past the four minutes
    p.produce("streamed", value=b"late", partition=0, timestamp=base + 10 * MINUTE)
    assert p.flush(30) == 0

    out, ckpt = tmp_path / "per-minute", tmp_path / "ckpt"
    code = load("streaming_count").main(
        [
            "--bootstrap-server",
            broker,
            "--topic",
            "streamed",
            "--parquet",
            str(out),
            "--checkpoint",
            str(ckpt),
            "--max-offsets-per-trigger",
            "250",
            "--available-now",
        ]
    )
    assert code == 0
    rows = spark.read.parquet(str(out)).collect()
    got = {int(r["minute"].timestamp() * 1000): (r["records"], r["value_bytes"]) for r in rows}
    assert got == produced  # every closed minute once; the open one (the late record) not yet
    batches = [f for f in (ckpt / "commits").iterdir() if f.name.isdigit()]
    assert len(batches) >= 2  # 401 records at 250 per trigger
