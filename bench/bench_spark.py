"""Spark-source benchmarks: which record decoder executors use, and (later) the cold scan.

Decoder section: the same segment bytes decoded into the source's Arrow schema by
  * `numpy`   - tierlog.spark.decode (length chain in Python, fields vectorised), and
  * `aiokafka` - aiokafka's Cython `_crecords` reader feeding Python lists into Arrow.
Both produce identical RecordBatches (checked before timing). Run:

    .venv/bin/python bench/bench_spark.py decoder [--records N] [--value-size B]

Scan section: one local[2] Spark scans the same topic into a noop sink two ways:
  * `direct`  - executors read the segment files themselves (`tierlog.log.dir`): the cold
                path's reader and decoder, without the object store in front;
  * `broker`  - executors fetch through the broker's Fetch path (our wire client), same
                decoder. Run:

    .venv/bin/python bench/bench_spark.py scan [--records N] [--value-size B]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from tierlog.spark.decode import decode_batches
from tierlog.spark.schema import arrow_schema

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build_segment(
    records: int, value_size: int, codec: int, per_batch: int, headers: bool
) -> bytes:
    """Batches as a producer would send them, with offsets assigned as the broker does."""
    rng = np.random.default_rng(7)
    # half random, half repetitive: compressible like real payloads, not trivially so
    noise = rng.integers(0, 256, size=value_size // 2, dtype=np.uint8).tobytes()
    out: list[bytes] = []
    offset = 0
    while offset < records:
        b = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 30)
        n = min(per_batch, records - offset)
        for i in range(n):
            o = offset + i
            value = noise + (b"%012d" % o) * (value_size // 2 // 12 + 1)
            hdrs = [("trace", b"%d" % o)] if headers else []
            b.append(i, 1_700_000_000_000 + o, b"key-%d" % (o % 1000), value[:value_size], hdrs)
        batch = bytearray(b.build())
        batch[0:8] = offset.to_bytes(8, "big")
        out.append(bytes(batch))
        offset += n
    return b"".join(out)


def decode_aiokafka(
    data: bytes, topic: str, partition: int, start: int, end: int, include_headers: bool
) -> pa.RecordBatch:
    """The candidate we measured against: C record parsing, then Python lists into Arrow."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    stamps: list[int] = []
    types: list[int] = []
    hdrs: list[list[dict[str, object]] | None] = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        if batch.is_control_batch:  # type: ignore[union-attr]
            continue
        for r in batch:
            if start <= r.offset < end:
                keys.append(r.key)
                values.append(r.value)
                offsets.append(r.offset)
                stamps.append(r.timestamp)
                types.append(r.timestamp_type)
                if include_headers:
                    h = r.headers
                    hdrs.append([{"key": k, "value": v} for k, v in h] if h else None)
    n = len(offsets)
    cols: list[pa.Array] = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets, pa.int64()),
        pa.array(np.array(stamps, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(types, pa.int32()),
    ]
    schema = arrow_schema(include_headers)
    if include_headers:
        cols.append(pa.array(hdrs, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def decode_numpy(
    data: bytes, topic: str, partition: int, start: int, end: int, include_headers: bool
) -> pa.RecordBatch:
    return decode_batches(
        data,
        topic=topic,
        partition=partition,
        start=start,
        end=end,
        include_headers=include_headers,
    ).batch


def best_of(fn: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_decoder(records: int, value_size: int, per_batch: int, runs: int) -> None:
    print(f"decoder: {records} records, {value_size} B values, {per_batch} records/batch")
    print(f"{'codec':8} {'headers':8} {'decoder':9} {'Mrec/s':>8} {'MB/s':>8}")
    decoders = {"numpy": decode_numpy, "aiokafka": decode_aiokafka}
    for name, codec in CODECS.items():
        for headers in (False, True):
            data = build_segment(records, value_size, codec, per_batch, headers)
            ref = decode_numpy(data, "t", 0, 0, records, headers)
            assert decode_aiokafka(data, "t", 0, 0, records, headers).equals(ref)
            assert ref.num_rows == records
            for dname, dec in decoders.items():

                def run(
                    dec: Callable[..., pa.RecordBatch] = dec, d: bytes = data, h: bool = headers
                ) -> object:
                    return dec(d, "t", 0, 0, records, h)

                t = best_of(run, runs)
                mb = records * value_size / t / 1e6
                print(f"{name:8} {headers!s:8} {dname:9} {records / t / 1e6:8.2f} {mb:8.0f}")


def _start_broker(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = 19400 + os.getpid() % 500
    log = root / "broker.log"
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("tierlog")),
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={root / 'data'}",
            "--override",
            f"metrics.listener=http://127.0.0.1:{port + 1}",
        ],
        cwd=root,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while b"tierlog ready" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(log.read_text()[-2000:])
        time.sleep(0.05)
    return proc, f"127.0.0.1:{port}"


def bench_scan(records: int, value_size: int, runs: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import tierlog.spark

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        proc, bootstrap = _start_broker(root)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for f in admin.create_topics([NewTopic("scan", 4, 1)]).values():
                f.result(30)
            p = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "linger.ms": "20",
                    "batch.size": str(1 << 20),
                    "compression.type": "lz4",
                }
            )
            value = os.urandom(value_size // 2) + b"x" * (value_size - value_size // 2)
            for i in range(records):
                while True:
                    try:
                        p.produce("scan", value=value, key=b"%d" % (i % 1000), partition=i % 4)
                        break
                    except BufferError:
                        p.poll(0.05)
            p.flush(120)
            spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            tierlog.spark.register(spark)
            sources = {
                "direct": {"tierlog.log.dir": str(root / "data")},
                "broker": {"kafka.bootstrap.servers": bootstrap},
            }
            mb = records * value_size / 1e6
            print(f"scan: {records} records x {value_size} B ({mb:.0f} MB of values), lz4")
            best = dict.fromkeys(sources, float("inf"))
            for opts in sources.values():  # warm up workers and JIT for both paths
                spark.read.format("tierlog").options(subscribe="scan", **opts).load().count()
            for _ in range(runs):  # alternate, so background load hits both alike
                for name, opts in sources.items():
                    df = spark.read.format("tierlog").options(subscribe="scan", **opts).load()
                    t0 = time.perf_counter()
                    df.write.format("noop").mode("overwrite").save()
                    best[name] = min(best[name], time.perf_counter() - t0)
            for name, t in best.items():
                print(f"{name:7} {records / t / 1e6:6.2f} Mrec/s {mb / t:7.0f} MB/s ({t:.2f} s)")
            spark.stop()
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("decoder")
    d.add_argument("--records", type=int, default=200_000)
    d.add_argument("--value-size", type=int, default=100)
    d.add_argument("--per-batch", type=int, default=1000)
    d.add_argument("--runs", type=int, default=3)
    sc = sub.add_parser("scan")
    sc.add_argument("--records", type=int, default=1_000_000)
    sc.add_argument("--value-size", type=int, default=100)
    sc.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if args.cmd == "decoder":
        bench_decoder(args.records, args.value_size, args.per_batch, args.runs)
    else:
        bench_scan(args.records, args.value_size, args.runs)


if __name__ == "__main__":
    main()
