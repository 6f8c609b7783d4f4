"""The `tierlog` source with Spark's `kafka.isolation.level=read_committed`, on both paths:
through the broker (Fetch bounded by the LSO with its aborted list) and straight from the
bucket (the remote transaction indexes), with a tiering broker over a `file://` bucket.

Transactions are written over the wire, this test playing the coordinator. One batch a
record; segments of five batches; `local.retention.bytes=1`, so everything but the active
segment ends up in the bucket only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.txn_wire import NO_VERIFICATION, PAD, TxnWriter
from tests.helpers.wire import EARLIEST_LOCAL, LATEST_TIERED
from tierlog.client import WireConnection
from tierlog.spark.options import OptionError, parse_source_options

pytestmark = pytest.mark.spark

TOPIC = "txn-spark"
A, B, C, PLAIN = 31, 32, 33, 34


@dataclass
class TxnTopic:
    broker: BrokerProcess
    bucket: Path
    committed: list[bytes]
    everything: list[bytes]
    lso: int


def _tiered_up_to(conn: WireConnection, end: int) -> bool:
    tiered = conn.list_offset(TOPIC, 0, LATEST_TIERED).offset
    local = conn.list_offset(TOPIC, 0, EARLIEST_LOCAL).offset
    return tiered == end - 1 and local == end


@pytest.fixture(scope="module")
def topic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxnTopic]:
    root = tmp_path_factory.mktemp("txn-spark")
    bucket = root / "bucket"
    bucket.mkdir()
    b = BrokerProcess(
        root / "broker",
        {
            "remote.log.storage.manager.class.name": "objectstore",
            "rsm.config.storage.url": bucket.as_uri(),
            "remote.log.manager.task.interval.ms": "300",
            "log.retention.check.interval.ms": "300",
            "log.segment.delete.delay.ms": "0",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
            **NO_VERIFICATION,
        },
    )
    b.start()
    with WireConnection(*b.host_port) as conn:
        code, _ = conn.create_topic(
            TOPIC,
            1,
            {
                "remote.storage.enable": "true",
                "index.interval.bytes": "1",
                "segment.index.bytes": "60",
                "local.retention.bytes": "1",
            },
        )
        assert code == 0
        w = TxnWriter(conn, TOPIC)
        for i, pid in enumerate([A, B, A, B, A]):  # [0,4]
            w.send(pid, b"%d-%d" % (pid, i))
        w.end(A, commit=False)  # 5: the abort lands one segment after A's data
        w.send(B, b"32-6")  # 6
        w.end(B, commit=True)  # 7
        w.send(PLAIN, b"plain-8", transactional=False)  # 8
        w.send(C, b"33-9")  # 9
        w.end(C, commit=False)  # 10
        for i in range(11, 15):
            w.send(PLAIN, b"plain-%d" % i, transactional=False)  # 11-14
        w.send(PLAIN, b"plain-15", transactional=False)  # rolls [10,14]
        wait_until(lambda: _tiered_up_to(conn, 15), 60, 0.2, what="[0,14] in the bucket")
        w.send(A, b"31-16")  # an open transaction: the LSO stays at 16
        w.send(PLAIN, b"plain-17", transactional=False)
    committed = [b"32-1", b"32-3", b"32-6", b"plain-8"] + [b"plain-%d" % i for i in range(11, 16)]
    everything = [b"31-0", b"32-1", b"31-2", b"32-3", b"31-4", b"32-6", b"plain-8", b"33-9"]
    everything += [b"plain-%d" % i for i in range(11, 16)] + [b"31-16", b"plain-17"]
    yield TxnTopic(b, bucket, committed, everything, 16)
    b.close()


def _values(df: Any) -> list[bytes]:
    rows = sorted(df.select("offset", "value").collect(), key=lambda r: r["offset"])
    return [bytes(r["value"]).removesuffix(PAD) for r in rows]


def test_isolation_level_is_spark_kafka_option() -> None:
    base = {"kafka.bootstrap.servers": "x:1", "subscribe": "t"}
    assert not parse_source_options(base, streaming=False).read_committed
    committed = {**base, "kafka.isolation.level": "read_committed"}
    assert parse_source_options(committed, streaming=False).read_committed
    with pytest.raises(OptionError, match=r"kafka\.isolation\.level"):
        parse_source_options({**base, "kafka.isolation.level": "serializable"}, streaming=False)


def test_read_committed_through_the_broker_and_the_bucket(spark: Any, topic: TxnTopic) -> None:
    """Cold slices from the bucket with the aborted transactions the driver collected, the
    hot tail through a read_committed Fetch; the latest offset is the LSO."""

    def reader() -> Any:  # DataFrameReader.option changes the reader it is called on
        return (
            spark.read.format("tierlog")
            .option("kafka.bootstrap.servers", topic.broker.bootstrap)
            .option("subscribe", TOPIC)
        )

    committed = reader().option("kafka.isolation.level", "read_committed").load()
    assert _values(committed) == topic.committed
    assert committed.agg({"offset": "max"}).collect()[0][0] < topic.lso
    assert _values(reader().load()) == topic.everything


def test_read_committed_with_the_broker_path_only(spark: Any, topic: TxnTopic) -> None:
    df = (
        spark.read.format("tierlog")
        .option("kafka.bootstrap.servers", topic.broker.bootstrap)
        .option("subscribe", TOPIC)
        .option("kafka.isolation.level", "read_committed")
        .option("tierlog.remote.reads", "false")
        .load()
    )
    assert _values(df) == topic.committed


def test_read_committed_from_the_bucket_with_the_broker_stopped(
    spark: Any, topic: TxnTopic
) -> None:
    bootstrap = topic.broker.bootstrap
    topic.broker.stop()
    df = (
        spark.read.format("tierlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("tierlog.rsm.config.storage.url", topic.bucket.as_uri())
        .option("startingOffsets", json.dumps({TOPIC: {"0": 0}}))
        .option("endingOffsets", json.dumps({TOPIC: {"0": 15}}))
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    assert _values(df) == topic.committed[:-1]  # plain-15 is at offset 15
