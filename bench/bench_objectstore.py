"""Object-store plugin benchmarks against a real S3 server (moto) behind a proxy that adds
object-store-like latency (default 50 ms per request).

(a) tiering throughput: ``copy_log_segment_data`` of one segment (plain, zstd, zstd+AES)
    against a raw multipart PUT of the same file with the same obstore client and the
    same part size / concurrency. Target: >= 0.8x raw.
(c) GET requests per GiB read: a cold sequential read of the segment through the plugin
    (disk chunk cache, 16 MiB prefetch), counted on the wire by the proxy. Target:
    <= 1.05 x GiB / chunk.size, plus the manifest and index GETs.
    Also printed: the same cold read with no cache and no prefetch (one chunk at a time),
    which shows what the latency costs without read-ahead.

(r) upload rate limit: a copy to ``file://`` with a 16 MiB/s limit takes as long as the
    limit says.

Run: ``.venv/bin/python bench/bench_objectstore.py [--segment-mib 64] [--latency-ms 50]``.
moto keeps objects in memory in one Python process sharing this machine's cores, so
absolute MiB/s are far below a real bucket's; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import boto3
import obstore

sys.path.insert(0, str(Path(__file__).parent))
from latency_proxy import LatencyProxy
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.tiered.api import (
    CustomMetadata,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

MiB = 1024 * 1024
GiB = 1024 * MiB


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    moto = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return proc, port
        except urllib.error.HTTPError:
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto_server did not start")


def build_segment(path: Path, size: int) -> None:
    """Record batches with JSON-like payloads (compressible about 3-5x, like real topics)."""
    rng = random.Random(42)
    names = ["alice", "bob", "carol", "dave", "erin", "frank"]
    with open(path, "wb") as f:
        written = 0
        offset = 0
        while written < size:
            records = []
            for _ in range(50):
                records.append(
                    (
                        f'{{"user":"{rng.choice(names)}","amount":{rng.randint(1, 10**6)},'
                        f'"ts":{1_700_000_000_000 + offset},'
                        f'"id":"{uuid.UUID(int=rng.getrandbits(128))}"}}'
                    ).encode()
                )
                offset += 1
            payload = b"\n".join(records)
            header = struct.pack(">qiibIhiqqqhii", offset, 49 + len(payload), 0, 2, 0, 0,
                                 49, 0, 0, -1, -1, -1, 50)  # fmt: skip
            f.write(header + payload)
            written += len(header) + len(payload)
        f.truncate(size)  # exact size, so GETs per GiB are not skewed by a tiny last chunk


def segment_files(directory: Path, size: int) -> LogSegmentData:
    log = directory / "00000000000000000000.log"
    build_segment(log, size)
    for name in ("index", "timeindex", "snapshot"):
        (directory / f"x.{name}").write_bytes(b"\0" * 4096)
    return LogSegmentData(
        log, directory / "x.index", directory / "x.timeindex", None,
        directory / "x.snapshot", b"0\n1\n0 0\n",
    )  # fmt: skip


def metadata(size: int, custom: CustomMetadata | None = None) -> RemoteLogSegmentMetadata:
    tip = TopicIdPartition(uuid.uuid4(), "bench", 0)
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(tip), 0, 1000, 0, 1, 0, size, custom,
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED, {0: 0},
    )  # fmt: skip


def make_rsm(props: dict[str, str]) -> ObjectStoreRemoteStorageManager:
    rsm = ObjectStoreRemoteStorageManager()
    rsm.configure(props)
    return rsm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="object-store plugin benchmarks")
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--chunk-mib", type=int, default=4)
    parser.add_argument("--part-mib", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=2, help="best of N for each timing")
    args = parser.parse_args(argv)

    moto, moto_port = start_moto()
    proxy = LatencyProxy("127.0.0.1", moto_port, latency_s=args.latency_ms / 1000)
    proxy_port = proxy.start()
    endpoint = f"http://127.0.0.1:{proxy_port}"
    boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{moto_port}", aws_access_key_id="x",
        aws_secret_access_key="x", region_name="us-east-1",
    ).create_bucket(Bucket="bench")  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="bench-objectstore-"))
    keys_dir = tmp / "keys"
    keys_dir.mkdir()
    base = {
        "storage.url": "s3://bench/tiered",
        "storage.s3.endpoint.url": endpoint,
        "storage.s3.region": "us-east-1",
        "storage.s3.path.style.access.enabled": "true",
        "storage.aws.access.key.id": "x",
        "storage.aws.secret.access.key": "x",
        "chunk.size": str(args.chunk_mib * MiB),
        "upload.part.size": str(args.part_mib * MiB),
        "upload.max.concurrency": str(args.concurrency),
        "storage.request.timeout.ms": "120000",
    }
    enc = encryption_props(keys_dir)
    lsd = segment_files(tmp, args.segment_mib * MiB)
    size = lsd.log_segment.stat().st_size
    results: dict[str, Any] = {}
    try:
        print(
            f"segment {size / MiB:.0f} MiB, chunk {args.chunk_mib} MiB, part {args.part_mib} MiB"
            f" x {args.concurrency}, latency {args.latency_ms:.0f} ms"
        )
        raw_rsm = make_rsm(base)

        def raw_put() -> float:
            started = time.perf_counter()
            obstore.put(
                raw_rsm.backend.store, "raw/segment", lsd.log_segment,
                chunk_size=args.part_mib * MiB, max_concurrency=args.concurrency,
            )  # fmt: skip
            return time.perf_counter() - started

        raw_put()  # warm-up: connection pool and server
        raw = min(raw_put() for _ in range(args.repeat))
        print(f"(a) raw multipart PUT          {size / MiB / raw:8.1f} MiB/s")
        results["raw_put_mib_s"] = size / MiB / raw
        variants = {
            "plain": {},
            "aes": enc,
            "zstd": {"compression.enabled": "true"},
            "zstd+aes": {"compression.enabled": "true"} | enc,
        }
        stored_md: dict[str, RemoteLogSegmentMetadata] = {}
        for name, extra in variants.items():
            rsm = make_rsm(base | extra)
            times = []
            for _ in range(args.repeat):
                md = metadata(size)
                started = time.perf_counter()
                custom = rsm.copy_log_segment_data(md, lsd)
                times.append(time.perf_counter() - started)
                stored_md[name] = RemoteLogSegmentMetadata(
                    md.remote_log_segment_id, 0, 1000, 0, 1, 0, size, custom,
                    RemoteLogSegmentState.COPY_SEGMENT_FINISHED, {0: 0},
                )  # fmt: skip
            best = min(times)
            stored = rsm.open_segment(stored_md[name]).manifest.chunk_index.stored_size
            ratio = raw / best
            print(f"(a) tiering {name:<18} {size / MiB / best:8.1f} MiB/s  = {ratio:.2f}x raw "
                  f"(stored {stored / MiB:.1f} MiB)")  # fmt: skip
            results[f"tier_{name}_ratio"] = ratio
            rsm.close()
        raw_rsm.close()

        for label, extra in (
            ("disk cache, 16 MiB prefetch", {
                "fetch.chunk.cache.class": "disk",
                "fetch.chunk.cache.path": str(tmp / "cache"),
                "fetch.chunk.cache.size": str(1024 * MiB),
                "fetch.chunk.cache.prefetch.max.size": str(16 * MiB),
            }),
            ("no cache, no prefetch", {
                "fetch.chunk.cache.class": "none",
                "fetch.chunk.cache.prefetch.max.size": "0",
            }),
        ):  # fmt: skip
            rsm = make_rsm(base | variants["zstd+aes"] | extra)
            proxy.reset_counts()
            started = time.perf_counter()
            read = 0
            with rsm.fetch_log_segment(stored_md["zstd+aes"], 0) as stream:
                while chunk := stream.read(MiB):
                    read += len(chunk)
            elapsed = time.perf_counter() - started
            assert read == size, (read, size)
            gets = proxy.count("GET")
            per_gib = (gets - 1) * GiB / size  # minus the manifest GET
            target = 1.05 * GiB / (args.chunk_mib * MiB)
            print(
                f"(c) cold read, {label:<28} {size / MiB / elapsed:8.1f} MiB/s, {gets} GETs"
                f" = {per_gib:.0f} chunk GETs/GiB (target <= {target:.0f}) + 1 manifest"
            )
            results[f"read_{label}"] = {"mib_s": size / MiB / elapsed, "gets_per_gib": per_gib}
            rsm.close()
        limit = 16 * MiB
        rsm = make_rsm(
            {
                "storage.url": f"file://{tmp}/ratelimited",
                "chunk.size": str(args.chunk_mib * MiB),
                "upload.rate.limit.bytes.per.second": str(limit),
            }
        )
        started = time.perf_counter()
        rsm.copy_log_segment_data(metadata(size), lsd)
        elapsed = time.perf_counter() - started
        expected = (size - limit) / limit  # the bucket starts full: one second of burst
        print(
            f"(r) rate limit {limit // MiB} MiB/s: copy took {elapsed:.2f} s "
            f"(expected >= {expected:.2f} s after a 1 s burst)"
        )
        rsm.close()
    finally:
        proxy.stop()
        moto.terminate()
        moto.wait(10)
    return 0


def encryption_props(directory: Path) -> dict[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "priv.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / "pub.pem").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return {
        "encryption.enabled": "true",
        "encryption.key.pair.id": "bench",
        "encryption.key.pairs": "bench",
        "encryption.key.pairs.bench.public.key.file": str(directory / "pub.pem"),
        "encryption.key.pairs.bench.private.key.file": str(directory / "priv.pem"),
    }


if __name__ == "__main__":
    raise SystemExit(main())
