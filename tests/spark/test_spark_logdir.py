"""The `tierlog` source in a real local[2] Spark, reading segment files the log engine wrote.

This exercises the executor path used for cold data (segment bytes -> decoder -> Arrow ->
Spark) without a broker: `tierlog.log.dir` points at a Kafka log directory.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.spark.spark_batches import Rec, build
from tierlog.log import LogManager, TopicPartition
from tierlog.log.config import LogConfig

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]


def produced(p: int, n: int) -> list[Rec]:
    return [
        Rec(
            o,
            T0 + p * 1000 + o,
            None if o % 9 == 0 else f"k{p}-{o}".encode(),
            f"value {p}/{o} ".encode() * (1 + o % 7),
            [("h", f"{o}".encode())] if o % 2 else [],
        )
        for o in range(n)
    ]


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, list[Rec]]]:
    root = tmp_path_factory.mktemp("logs")
    cfg = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)
    mgr = LogManager([root], cfg)
    mgr.load()
    topic_id = uuid.uuid4()
    data: dict[int, list[Rec]] = {}
    for p in range(3):
        log = mgr.create_log(TopicPartition("events", p), topic_id, cfg)
        recs = produced(p, 1500 + 250 * p)
        for i in range(0, len(recs), 40):
            chunk = recs[i : i + 40]
            log.append_as_leader(build(chunk, CODECS[(i // 40) % 5]), leader_epoch=0)
        data[p] = recs
    mgr.shutdown()
    return root, data


def row(r: Rec, p: int) -> dict[str, Any]:
    return {
        "key": r.key,
        "value": r.value,
        "topic": "events",
        "partition": p,
        "offset": r.offset,
        "timestamp": dt.datetime.fromtimestamp(r.timestamp / 1000, dt.UTC).replace(tzinfo=None),
        "timestampType": 0,
        "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
    }


def as_dicts(df: Any) -> list[dict[str, Any]]:
    out = []
    for r in df.collect():
        d = r.asDict(recursive=True)
        if d.get("headers") is not None:
            d["headers"] = [{"key": h["key"], "value": bytes(h["value"])} for h in d["headers"]]
        for k in ("key", "value"):
            d[k] = bytes(d[k]) if d[k] is not None else None
        out.append(d)
    return sorted(out, key=lambda d: (d["partition"], d["offset"]))


def test_full_read_of_a_log_dir_returns_every_record_once(
    spark: Any, log_dir: tuple[Path, dict[int, list[Rec]]]
) -> None:
    root, data = log_dir
    assert len(list((root / "events-0").glob("*.log"))) >= 3  # several segments per partition
    df = (
        spark.read.format("tierlog")
        .option("tierlog.log.dir", str(root))
        .option("subscribe", "events")
        .option("includeHeaders", "true")
        .option("tierlog.split.bytes", str(8 * 1024))  # several input partitions per segment
        .load()
    )
    expected = [row(r, p) for p in sorted(data) for r in data[p]]
    assert as_dicts(df) == expected
    assert df.rdd.getNumPartitions() > 3 * 3


def test_bounded_read_honours_offsets_and_max_records(
    spark: Any, log_dir: tuple[Path, dict[int, list[Rec]]]
) -> None:
    root, data = log_dir
    starting = {"events": {"0": 17, "2": 999}}
    ending = {"events": {"0": 1203, "2": 1000}}
    df = (
        spark.read.format("tierlog")
        .option("tierlog.log.dir", str(root))
        .option("assign", json.dumps({"events": [0, 2]}))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("maxRecordsPerPartition", "100")
        .load()
    )
    got = as_dicts(df)
    expected = [
        {k: v for k, v in row(r, p).items() if k != "headers"}
        for p in (0, 2)
        for r in data[p]
        if starting["events"][str(p)] <= r.offset < ending["events"][str(p)]
    ]
    assert got == expected
    # partition 0's range crosses segments [0, 560), [560, 1080), [1080, ...): pieces of
    # 543, 520 and 123 offsets become 6 + 6 + 2 slices of <= 100; partition 2 needs one.
    assert [len(list((root / f"events-{p}").glob("*.log"))) for p in (0,)] == [3]
    assert df.rdd.getNumPartitions() == 6 + 6 + 2 + 1
