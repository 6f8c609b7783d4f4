"""The examples run: the backfill job against a real broker, in the shared Spark session."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOUR = 3_600_000


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
