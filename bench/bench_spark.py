"""Spark-source benchmarks: which record decoder executors use, and the cold history scan.

Decoder section: the same segment bytes decoded into the source's Arrow schema by
  * `numpy`   - tierlog.spark.decode (length chain in Python, fields vectorised), and
  * `aiokafka` - aiokafka's Cython `_crecords` reader feeding Python lists into Arrow.
Both produce identical RecordBatches (checked before timing). Run:

    .venv/bin/python bench/bench_spark.py decoder [--records N] [--value-size B,B,...]

Scan section: one local[2] Spark scans the same topic into a noop sink two ways:
  * `direct`  - executors read the segment files themselves (`tierlog.log.dir`): the cold
                path's reader and decoder, without the object store in front;
  * `broker`  - executors fetch through the broker's Fetch path (our wire client), same
                decoder. Run:

    .venv/bin/python bench/bench_spark.py scan [--records N] [--value-size B]

Cold section (the issue's benchmark): a broker tiers a topic to an object-store `file://`
bucket, then one Spark scans the remote offsets two ways:
  * `direct` - executors read the segment objects with the storage plugin's own read
               path (the default plan: one input partition per remote segment);
  * `broker` - `tierlog.remote.reads=false`: every offset through the broker's Fetch path,
               which serves them from the same bucket through its RemoteLogManager. Run:

    .venv/bin/python bench/bench_spark.py cold [--records N] [--master local[1]]
        [--transforms] [--value-size B] [--segment-mb M] [--broker-cores F]

`--broker-cores F` holds the broker to F cores (cgroup v1 CPU quota) during the scans: a
scale model of one broker serving many executor cores, which two shared cores cannot host.
"""

from __future__ import annotations

import argparse
import os
import socket
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
    """The candidate we measured against: C record parsing, then Python lists into Arrow.

    CRCs are checked on both sides: consumers do by default (`check.crcs`), and so do our
    executors."""
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
        if not batch.validate_crc():  # type: ignore[union-attr]  # as check.crcs=true, as ours
            raise ValueError("CRC mismatch")
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


#: Large values get fewer records per case, so a case stays well inside memory.
MAX_CASE_BYTES = 4 << 20


def bench_decoder(records: int, value_sizes: list[int], per_batch: int, runs: int) -> None:
    """Every codec x headers x value size in one run, so the rows share the machine's load."""
    print(f"decoder: up to {records} records (<= 4 MiB of values: an executor decodes")
    print(f"4 MiB reads) per case, {per_batch} records/batch, best of {runs}")
    print("Mrec/s and MB/s (of values) for numpy (tierlog.spark.decode) and aiokafka")
    print(
        f"{'value B':>7} {'codec':7} {'headers':7} {'numpy Mrec/s':>12} {'MB/s':>6} "
        f"{'aiokafka Mrec/s':>15} {'MB/s':>6} {'ratio':>6}"
    )
    decoders = {"numpy": decode_numpy, "aiokafka": decode_aiokafka}
    for value_size in value_sizes:
        n = min(records, max(per_batch, MAX_CASE_BYTES // value_size))
        for name, codec in CODECS.items():
            for headers in (False, True):
                data = build_segment(n, value_size, codec, per_batch, headers)
                ref = decode_numpy(data, "t", 0, 0, n, headers)
                assert decode_aiokafka(data, "t", 0, 0, n, headers).equals(ref)
                assert ref.num_rows == n
                rate: dict[str, float] = {}
                for dname, dec in decoders.items():

                    def run(
                        dec: Callable[..., pa.RecordBatch] = dec,
                        d: bytes = data,
                        h: bool = headers,
                        n: int = n,
                    ) -> object:
                        return dec(d, "t", 0, 0, n, h)

                    rate[dname] = n / best_of(run, runs)
                mb = {k: r * value_size / 1e6 for k, r in rate.items()}
                print(
                    f"{value_size:7} {name:7} {headers!s:7} {rate['numpy'] / 1e6:12.2f} "
                    f"{mb['numpy']:6.0f} {rate['aiokafka'] / 1e6:15.2f} {mb['aiokafka']:6.0f} "
                    f"{rate['numpy'] / rate['aiokafka']:5.1f}x"
                )


BrokerProc = tuple[subprocess.Popen[bytes], str]


def _start_broker(root: Path, overrides: dict[str, str] | None = None) -> BrokerProc:
    port = 19400 + os.getpid() % 500
    log = root / "broker.log"
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(root / "data"),
        "metrics.listener": f"http://127.0.0.1:{port + 1}",
        **(overrides or {}),
    }
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("tierlog")),
            "serve",
            *(a for k, v in settings.items() for a in ("--override", f"{k}={v}")),
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


#: Credentials of the S3 variant: secret, so the broker does not disclose them and the
#: job passes them itself, as a real job would.
S3_SECRETS = {"storage.aws.access.key.id": "x", "storage.aws.secret.access.key": "x"}


def _start_s3(latency_ms: float) -> tuple[Callable[[], None], dict[str, str]]:
    """moto's S3 server behind the latency proxy; returns (stop, plugin settings)."""
    import urllib.request

    import boto3

    from latency_proxy import LatencyProxy

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    moto = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)
    boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        region_name="us-east-1",
    ).create_bucket(Bucket="bench")
    proxy = LatencyProxy("127.0.0.1", port, latency_s=latency_ms / 1000)
    proxy_port = proxy.start()

    def stop() -> None:
        proxy.stop()
        moto.terminate()
        moto.wait(10)

    return stop, {
        "storage.url": "s3://bench/tiered",
        "storage.s3.endpoint.url": f"http://127.0.0.1:{proxy_port}",
        "storage.s3.region": "us-east-1",
        "storage.s3.path.style.access.enabled": "true",
    }


def _start_tiered_broker(
    root: Path, bucket: Path, transforms: bool, store: dict[str, str] | None = None
) -> BrokerProc:
    """A broker tiering with the object-store plugin: a `file://` bucket, or `store`."""
    settings = {"storage.url": bucket.as_uri()} if store is None else {**store, **S3_SECRETS}
    settings["fetch.chunk.cache.class"] = "none"  # a history scan is read once: no warm cache
    overrides = {
        "remote.log.storage.manager.class.name": "objectstore",
        **{f"rsm.config.{k}": v for k, v in settings.items()},
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "500",
        "log.segment.delete.delay.ms": "0",
    }
    if transforms:
        overrides["rsm.config.compression.enabled"] = "true"
    return _start_broker(root, overrides)


def _produce(
    bootstrap: str, topic: str, records: int, value_size: int, configs: dict[str, str]
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 4, 1, config=configs)]).values():
        f.result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": "20",
            "batch.size": str(1 << 20),
            "compression.type": "lz4",
        }
    )
    # distinct values, half random and half text: lz4 stores ~60% of them, like real data
    noise = os.urandom(1 << 20)
    half = value_size // 2
    for i in range(records):
        at = (i * 7919) % ((1 << 20) - half)
        text = (b'{"n":%d,"s":"' % i + b"abcdefgh" * value_size)[: value_size - half]
        value = noise[at : at + half] + text
        while True:
            try:
                p.produce(topic, value=value, key=b"%d" % (i % 1000), partition=i % 4)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def _wait_tiered(bootstrap: str, topic: str, timeout_s: float) -> dict[int, int]:
    """Poll until every sealed segment is uploaded and gone from the local tier (the local
    start offsets stop moving and the highest tiered offset sits just below them)."""
    from tierlog.spark.wire import BrokerClient

    deadline = time.monotonic() + timeout_s
    tps = [(topic, p) for p in range(4)]
    last: dict[int, int] = {}
    still = 0
    while True:
        with BrokerClient(bootstrap) as c:
            local = {tp[1]: o for tp, (o, _) in c.list_offsets(dict.fromkeys(tps, -4)).items()}
            tiered = {tp[1]: o for tp, (o, _) in c.list_offsets(dict.fromkeys(tps, -5)).items()}
        done = all(local[p] > 0 and tiered[p] == local[p] - 1 for p in range(4))
        still = still + 1 if done and local == last else 0
        if still >= 4:
            return local
        if time.monotonic() > deadline:
            raise RuntimeError(f"not tiered after {timeout_s}s: local starts {local}")
        last = local
        time.sleep(0.5)


def _tree_cpu_by_command(root_pid: int) -> dict[str, float]:
    """CPU seconds used so far by a process tree (reaped children included), per command
    name (`java`: the Spark JVM; `python*`: driver and Python workers): on a shared
    machine, throughput swings with other load while CPU per record does not."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[str, list[str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        stats[int(entry)] = (comm, fields)
        children.setdefault(int(fields[1]), []).append(int(entry))
    out: dict[str, float] = {}
    todo = [root_pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        pid = todo.pop()
        found = stats.get(pid)
        if found is not None:
            comm, f = found
            name = "python" if comm.startswith("python") else comm
            used = sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
            out[name] = out.get(name, 0.0) + used
        todo.extend(children.get(pid, []))
    return out


def _tree_cpu_seconds(root_pid: int) -> float:
    return sum(_tree_cpu_by_command(root_pid).values())


def bench_cold(
    records: int,
    value_size: int,
    runs: int,
    master: str,
    transforms: bool,
    segment_mb: int,
    s3_latency_ms: float | None,
    broker_cores: float | None = None,
) -> None:
    """Cold history scan of a fully tiered topic: executors reading the bucket directly
    (the default) against the same scan through the broker's Fetch path, which serves the
    remote offsets from the same bucket (`tierlog.remote.reads=false`)."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import tierlog.spark

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bucket = root / "bucket"
        bucket.mkdir()
        stop_s3, store = _start_s3(s3_latency_ms) if s3_latency_ms is not None else (None, None)
        proc, bootstrap = _start_tiered_broker(root, bucket, transforms, store)
        try:
            configs = {
                "remote.storage.enable": "true",
                "segment.bytes": str(segment_mb << 20),
                "local.retention.bytes": "1",
            }
            _produce(bootstrap, "cold", records, value_size, configs)
            local = _wait_tiered(bootstrap, "cold", 600)
            if broker_cores is not None:  # after produce and upload, which it would slow
                _cap_cpu(proc.pid, broker_cores)
            cold = {"cold": {str(p): o for p, o in local.items()}}
            spark = (
                SparkSession.builder.master(master)
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            tierlog.spark.register(spark)
            import json

            base = {
                "kafka.bootstrap.servers": bootstrap,
                "subscribe": "cold",
                "endingOffsets": json.dumps(cold),  # the remote part only
            }
            base["tierlog.rsm.config.fetch.chunk.cache.class"] = "none"  # cold, as the broker
            if store is not None:
                base.update({f"tierlog.rsm.config.{k}": v for k, v in S3_SECRETS.items()})
            sources = {
                "direct": base,
                "broker": {**base, "tierlog.remote.reads": "false"},
            }
            n = sum(local.values())
            stored = _stored_log_bytes(bucket, store)
            mb = n * value_size / 1e6
            print(
                f"cold scan ({master}): {n} remote records x {value_size} B "
                f"({mb:.0f} MB of values, {stored / 1e6:.0f} MB of .log objects), lz4 batches, "
                f"{'zstd chunks' if transforms else 'no transforms'}, "
                + (f"S3 (moto) +{s3_latency_ms:.0f} ms/request" if store else "file:// bucket")
                + (f"; broker held to {broker_cores} of a core" if broker_cores else "")
            )
            best = dict.fromkeys(sources, float("inf"))
            cpu = dict.fromkeys(sources, float("inf"))
            broker_cpu = dict.fromkeys(sources, float("inf"))
            jvm_cpu = dict.fromkeys(sources, float("inf"))
            tasks = dict.fromkeys(sources, 0)
            for name, opts in sources.items():  # warm up workers, plugin instances, cache
                df = spark.read.format("tierlog").options(**opts).load()
                assert df.count() == n
                tasks[name] = df.rdd.getNumPartitions()
            for _ in range(runs):
                for name, opts in sources.items():
                    df = spark.read.format("tierlog").options(**opts).load()
                    b0 = _tree_cpu_seconds(proc.pid)
                    c0, t0 = _tree_cpu_by_command(os.getpid()), time.perf_counter()
                    df.write.format("noop").mode("overwrite").save()
                    best[name] = min(best[name], time.perf_counter() - t0)
                    c1 = _tree_cpu_by_command(os.getpid())
                    used = sum(c1.values()) - sum(c0.values())
                    if used < cpu[name]:  # the JVM's share of the same (cheapest) run
                        jvm_cpu[name] = c1.get("java", 0.0) - c0.get("java", 0.0)
                    cpu[name] = min(cpu[name], used)
                    broker_cpu[name] = min(broker_cpu[name], _tree_cpu_seconds(proc.pid) - b0)
            for name, t in best.items():
                print(
                    f"{name:7} {tasks[name]:3} tasks {n / t / 1e6:6.2f} Mrec/s {mb / t:5.0f} MB/s "
                    f"({t:.2f} s); CPU {cpu[name]:.2f} s = {n / cpu[name] / 1e6:.2f} Mrec/CPU-s, "
                    f"of which broker {broker_cpu[name]:.2f} s, Spark JVM {jvm_cpu[name]:.2f} s"
                )
            print(
                f"direct / broker: {best['broker'] / best['direct']:.2f}x wall, "
                f"{cpu['broker'] / cpu['direct']:.2f}x CPU"
            )
            spark.stop()
        finally:
            proc.terminate()
            proc.wait(30)
            if stop_s3 is not None:
                stop_s3()


def _cap_cpu(pid: int, cores: float) -> None:
    """Hold a process (all its threads) to ``cores`` of CPU with a cgroup v1 CFS quota: a
    scale model of one broker serving many executors on a machine with two cores."""
    group = Path("/sys/fs/cgroup/cpu/tierlog-bench-broker")
    group.mkdir(exist_ok=True)
    period = 100_000
    (group / "cpu.cfs_period_us").write_text(str(period))
    (group / "cpu.cfs_quota_us").write_text(str(int(period * cores)))
    (group / "cgroup.procs").write_text(str(pid))


def _stored_log_bytes(bucket: Path, store: dict[str, str] | None) -> int:
    if store is None:
        return sum(f.stat().st_size for f in bucket.rglob("*.log"))
    from tierlog.spark.bucket import iter_bucket, manifest_plugin
    from tierlog.spark.segments import RsmSpec
    from tierlog.tiered.api import ObjectKind

    plugin = manifest_plugin(RsmSpec.of("objectstore", {**store, **S3_SECRETS}))
    total = 0
    for o in iter_bucket(plugin):
        found = plugin.identify(o.key)
        if found is not None and found.kind is ObjectKind.LOG:
            total += o.size
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("decoder")
    d.add_argument("--records", type=int, default=200_000)
    d.add_argument(
        "--value-size", default="10,100,1000,10000", help="comma-separated sizes in bytes"
    )
    d.add_argument("--per-batch", type=int, default=1000)
    d.add_argument("--runs", type=int, default=3)
    sc = sub.add_parser("scan")
    sc.add_argument("--records", type=int, default=1_000_000)
    sc.add_argument("--value-size", type=int, default=100)
    sc.add_argument("--runs", type=int, default=3)
    c = sub.add_parser("cold")
    c.add_argument("--records", type=int, default=1_000_000)
    c.add_argument("--value-size", type=int, default=100)
    c.add_argument("--runs", type=int, default=3)
    c.add_argument("--master", default="local[2]")
    c.add_argument("--segment-mb", type=int, default=4)
    c.add_argument("--transforms", action="store_true", help="zstd chunks in the bucket")
    c.add_argument(
        "--s3-latency-ms", type=float, help="S3 (moto) behind a proxy adding this latency"
    )
    c.add_argument(
        "--broker-cores",
        type=float,
        help="cap the broker at this much CPU during the scans (cgroup v1 quota): a scale "
        "model of one broker core shared by many executor cores",
    )
    args = ap.parse_args()
    if args.cmd == "decoder":
        sizes = [int(v) for v in args.value_size.split(",")]
        bench_decoder(args.records, sizes, args.per_batch, args.runs)
    elif args.cmd == "scan":
        bench_scan(args.records, args.value_size, args.runs)
    else:
        bench_cold(
            args.records,
            args.value_size,
            args.runs,
            args.master,
            args.transforms,
            args.segment_mb,
            args.s3_latency_ms,
            args.broker_cores,
        )


if __name__ == "__main__":
    main()
