"""The `tierlog` source and sink against a real `tierlog serve`, in a real local[2] Spark.

Records come from confluent-kafka (librdkafka batches) in every codec, with keys, null
keys and headers. These topics are not tiered, so they exercise the broker path; the cold
path is covered by test_spark_tiered.py (a tiering broker) and test_spark_logdir.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.spark

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 4000


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, start: int, n: int) -> list[dict[str, Any]]:
    """Records i in [start, start+n), spread over codecs; returns them as Spark would."""
    out: list[dict[str, Any]] = []
    per_codec = -(-n // len(CODECS))
    for c, codec in enumerate(CODECS):
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": "20"})
        for i in range(start + c * per_codec, min(start + (c + 1) * per_codec, start + n)):
            key = None if i % 10 == 0 else f"key-{i}".encode()
            value = f"value-{i}-".encode() * (1 + i % 5)
            headers: list[tuple[str, str | bytes | None]] | None = (
                [("i", str(i).encode()), ("codec", codec.encode())] if i % 3 else None
            )
            p.produce(topic, value=value, key=key, partition=i % 4, headers=headers)
            out.append(
                {
                    "key": key,
                    "value": value,
                    "partition": i % 4,
                    "headers": [{"key": k, "value": v} for k, v in headers] if headers else None,
                }
            )
        assert p.flush(30) == 0
    return out


def rows(df: Any, cols: tuple[str, ...]) -> list[tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        if isinstance(v, bytearray):
            return bytes(v)
        if isinstance(v, list):
            return tuple((h["key"], bytes(h["value"])) for h in v)
        return v

    return sorted((tuple(norm(r[c]) for c in cols) for r in df.collect()), key=repr)


def expected(recs: list[dict[str, Any]], cols: tuple[str, ...]) -> list[tuple[Any, ...]]:
    def norm(r: dict[str, Any], c: str) -> Any:
        if c == "headers":
            return None if r[c] is None else tuple((h["key"], h["value"]) for h in r[c])
        return r[c]

    return sorted((tuple(norm(r, c) for c in cols) for r in recs), key=repr)


@pytest.fixture(scope="module")
def topic(broker: str) -> tuple[str, list[dict[str, Any]]]:
    create_topic(broker, "history", 4)
    return "history", produce(broker, "history", 0, N)


def test_batch_read_returns_exactly_the_produced_records(
    spark: Any, broker: str, topic: tuple[str, Any]
) -> None:
    name, recs = topic
    df = (
        spark.read.format("tierlog")
        .option("kafka.bootstrap.servers", broker)
        .option("subscribe", name)
        .option("includeHeaders", "true")
        .load()
    )
    got = df.collect()
    assert len(got) == N
    cols = ("key", "value", "partition", "headers")
    assert rows(df, cols) == expected(recs, cols)
    per_partition: dict[int, list[int]] = {}
    for r in got:
        per_partition.setdefault(r["partition"], []).append(r["offset"])
    # offsets are dense and each appears once: every offset of [0, end) per partition
    assert {p: sorted(o) for p, o in per_partition.items()} == {
        p: list(range(N // 4)) for p in range(4)
    }
    assert {r["timestampType"] for r in got} == {0}


def test_streaming_available_now_resumes_from_checkpoint(
    spark: Any, broker: str, topic: tuple[str, Any], tmp_path: Path
) -> None:
    name, recs = topic
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run() -> list[Any]:
        q = (
            spark.readStream.format("tierlog")
            .option("kafka.bootstrap.servers", broker)
            .option("subscribe", name)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "1500")
            .load()
            .selectExpr("key", "value", "partition", "offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(300)
        assert q.exception() is None
        return [p for p in q.recentProgress if p["numInputRows"] > 0]

    first = run()
    assert len(first) >= 2  # 4000 records at <= 1500 per trigger
    assert all(p["numInputRows"] <= 1500 for p in first)
    more = produce(broker, name, N, 800)
    second = run()
    assert sum(p["numInputRows"] for p in second) == 800
    df = spark.read.parquet(str(out))
    assert df.count() == N + 800
    assert df.select("partition", "offset").distinct().count() == N + 800
    assert rows(df, ("key", "value", "partition")) == expected(
        recs + more, ("key", "value", "partition")
    )


def test_sink_write_then_read_back(spark: Any, broker: str) -> None:
    create_topic(broker, "sunk", 3)
    data = [
        (
            f"k{i}" if i % 4 else None,
            f"v{i}".encode(),
            i % 3,
            [("n", str(i).encode())] if i % 2 else None,
        )
        for i in range(300)
    ]
    schema = (
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    src = spark.createDataFrame(data, schema)
    (
        src.write.format("tierlog")
        .option("kafka.bootstrap.servers", broker)
        .option("topic", "sunk")
        .mode("append")
        .save()
    )
    back = (
        spark.read.format("tierlog")
        .option("kafka.bootstrap.servers", broker)
        .option("assign", json.dumps({"sunk": [0, 1, 2]}))
        .option("includeHeaders", "true")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "value", "partition", "headers")
    )
    cols = ("key", "value", "partition", "headers")
    assert rows(back, cols) == rows(src, cols)
