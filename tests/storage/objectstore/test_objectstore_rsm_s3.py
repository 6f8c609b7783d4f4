"""The plugin against a real S3 server (moto over HTTP), with a proxy on the wire to count
requests and inject failures."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests.helpers.poll import wait_until
from tests.storage.objectstore.objectstore_helpers import (
    MiB,
    encryption_props,
    finished,
    make_rsm,
    poll_until,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore.errors import CorruptDataError
from tierlog.tiered.api import (
    IndexType,
    RemoteResourceNotFoundException,
    RetriableRemoteStorageException,
)


def _proxied(props: dict[str, str], proxy: Any) -> dict[str, str]:
    return props | {"storage.s3.endpoint.url": f"http://127.0.0.1:{proxy.port}"}


def _bucket_of(props: dict[str, str]) -> str:
    return props["storage.url"].split("/")[2]


def _keys(client: Any, props: dict[str, str]) -> list[str]:
    listing = client.list_objects_v2(Bucket=_bucket_of(props))
    return sorted(o["Key"] for o in listing.get("Contents", []))


@pytest.mark.parametrize(("compress", "encrypt"), [(False, False), (True, True)])
def test_copy_fetch_delete_on_s3(
    tmp_path: Path,
    s3_bucket: dict[str, str],
    s3_admin: Any,
    rsa_key_pair: Callable[[str], Any],
    compress: bool,
    encrypt: bool,
) -> None:
    lsd, data = segment_data(tmp_path / "seg", 12 * MiB + 17)
    props = s3_bucket | {
        "chunk.size": str(1 * MiB),
        "upload.part.size": str(5 * MiB),
        "compression.enabled": str(compress).lower(),
        "fetch.chunk.cache.class": "disk",
        "fetch.chunk.cache.path": str(tmp_path / "cache"),
    }
    if encrypt:
        pair = rsa_key_pair("s3")
        props |= encryption_props({"k": (pair.public, pair.private)}, "k")
    rsm = make_rsm(props)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    keys = _keys(s3_admin, props)
    assert len(keys) == 3 and all(k.startswith("tiered/orders-") for k in keys)
    assert rsm.fetch_log_segment(stored, 0).read() == data
    assert rsm.fetch_log_segment(stored, MiB - 1, 3 * MiB).read() == data[MiB - 1 : 3 * MiB + 1]
    assert rsm.fetch_index(stored, IndexType.LEADER_EPOCH).read() == lsd.leader_epoch_index
    rsm.copy_log_segment_data(md, lsd)  # idempotent re-copy overwrites
    assert len(_keys(s3_admin, props)) == 3
    rsm.delete_log_segment_data(stored)
    rsm.delete_log_segment_data(stored)  # deleting what is gone succeeds
    assert _keys(s3_admin, props) == []
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(stored, 0)
    rsm.close()


def test_exactly_one_ranged_get_per_needed_chunk(
    tmp_path: Path, s3_bucket: dict[str, str], latency_proxy: Any
) -> None:
    lsd, data = segment_data(tmp_path / "seg", 10 * 256 * 1024)  # 10 chunks of 256 KiB
    chunk = 256 * 1024
    base = _proxied(s3_bucket, latency_proxy) | {"chunk.size": str(chunk)}
    writer = make_rsm(base)
    md = segment_metadata(len(data))
    stored = finished(md, writer.copy_log_segment_data(md, lsd))
    writer.close()

    reader = make_rsm(
        base | {"fetch.chunk.cache.class": "none", "fetch.chunk.cache.prefetch.max.size": "0"}
    )
    latency_proxy.reset_counts()
    got = reader.fetch_log_segment(stored, 2 * chunk + 5, 5 * chunk + 9).read()
    assert got == data[2 * chunk + 5 : 5 * chunk + 10]
    # chunks 2, 3, 4, 5 plus the manifest, each exactly once
    assert latency_proxy.count("GET") == 4 + 1
    ranges = [r for m, _, r in latency_proxy.log.entries if m == "GET" and r]
    assert len(ranges) == len(set(ranges)) == 4
    reader.close()

    # with a cache and parallel read-ahead, a full read still fetches each chunk once,
    # and a second read is served from the cache
    cached = make_rsm(
        base
        | {
            "fetch.chunk.cache.class": "memory",
            "fetch.chunk.cache.prefetch.max.size": str(4 * chunk),
        }
    )
    latency_proxy.reset_counts()
    assert cached.fetch_log_segment(stored, 0).read() == data
    assert latency_proxy.count("GET") == 10 + 1
    assert cached.fetch_log_segment(stored, 0).read() == data
    assert latency_proxy.count("GET") == 10 + 1
    assert cached.chunk_cache.stats.prefetch_hits >= 1
    cached.close()


@pytest.mark.parametrize("fault", ["503", "reset"])
def test_mid_upload_failure_aborts_the_multipart_upload_and_is_retriable(
    tmp_path: Path,
    s3_bucket: dict[str, str],
    s3_admin: Any,
    latency_proxy: Any,
    proxy_fault: Any,
    fault: str,
) -> None:
    lsd, data = segment_data(tmp_path / "seg", 16 * MiB)
    props = _proxied(s3_bucket, latency_proxy) | {
        "chunk.size": str(MiB),
        "upload.part.size": str(5 * MiB),
        "upload.max.concurrency": "2",
        "compression.enabled": "true",
    }
    rsm = make_rsm(props)
    md = segment_metadata(len(data))
    # every part upload fails (more times than the client retries)
    latency_proxy.inject(proxy_fault(fault, count=1000, path_contains="partNumber="))
    with pytest.raises(RetriableRemoteStorageException):
        rsm.copy_log_segment_data(md, lsd)
    latency_proxy.clear_faults()
    assert s3_admin.list_multipart_uploads(Bucket=_bucket_of(s3_bucket)).get("Uploads") is None
    assert _keys(s3_admin, s3_bucket) == []  # nothing half-written is left behind
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))  # the retry succeeds
    assert rsm.fetch_log_segment(stored, 0).read() == data
    rsm.close()


def test_throttling_is_retried_by_the_client_and_counted(
    tmp_path: Path, s3_bucket: dict[str, str], latency_proxy: Any, proxy_fault: Any
) -> None:
    lsd, data = segment_data(tmp_path / "seg", 300_000)
    rsm = make_rsm(
        _proxied(s3_bucket, latency_proxy)
        | {"chunk.size": "100000", "fetch.chunk.cache.prefetch.max.size": "0"}
    )
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    latency_proxy.inject(proxy_fault("503", count=1, method="GET"))
    before = REGISTRY.get_sample_value(
        "tierlog_objectstore_request_errors_total",
        {"operation": "get_range", "error_class": "throttled"},
    )
    assert rsm.fetch_log_segment(stored, 0).read() == data  # one 503, retried inside
    assert latency_proxy.log.faults_applied["503"] == 1
    latency_proxy.inject(proxy_fault("503", count=100, method="GET"))
    rsm.chunk_cache.clear()
    with pytest.raises(RetriableRemoteStorageException, match="throttled"):
        rsm.fetch_log_segment(stored, 0).read()
    after = REGISTRY.get_sample_value(
        "tierlog_objectstore_request_errors_total",
        {"operation": "get_range", "error_class": "throttled"},
    )
    assert (after or 0) == (before or 0) + 1
    rsm.close()


def test_segments_stay_readable_and_deletable_after_the_prefix_changes(
    tmp_path: Path, s3_bucket: dict[str, str], s3_admin: Any, s3_props_for: Any
) -> None:
    lsd, data = segment_data(tmp_path / "seg", 200_000)
    old = make_rsm(s3_bucket)
    md = segment_metadata(len(data), topic="t" * 249)
    custom = old.copy_log_segment_data(md, lsd)
    assert custom is not None and len(custom.value) <= 128
    stored = finished(md, custom)
    old.close()
    bucket = _bucket_of(s3_bucket)
    new = make_rsm(s3_props_for(bucket, "moved") | {"key.prefix.mask": "0xff"})
    assert new.fetch_log_segment(stored, 0).read() == data
    new.delete_log_segment_data(stored)
    assert _keys(s3_admin, s3_bucket) == []
    new.close()


def test_tampered_chunk_fails_only_that_fetch(
    tmp_path: Path,
    s3_bucket: dict[str, str],
    s3_admin: Any,
    rsa_key_pair: Callable[[str], Any],
) -> None:
    pair = rsa_key_pair("tamper")
    props = (
        s3_bucket
        | {"chunk.size": "100000", "compression.enabled": "true"}
        | encryption_props({"k": (pair.public, pair.private)}, "k")
    )
    rsm = make_rsm(props)
    lsd, data = segment_data(tmp_path / "a", 500_000)
    md_a, md_b = segment_metadata(len(data)), segment_metadata(len(data), partition=1)
    stored_a = finished(md_a, rsm.copy_log_segment_data(md_a, lsd))
    stored_b = finished(md_b, rsm.copy_log_segment_data(md_b, lsd))
    client = s3_admin
    log_key = rsm.keys_for(stored_a).log
    body = bytearray(client.get_object(Bucket=_bucket_of(props), Key=log_key)["Body"].read())
    second_chunk = rsm.open_segment(stored_a).manifest.chunk_index.stored_range(1)
    body[second_chunk[0] + 40] ^= 0x5A
    client.put_object(Bucket=_bucket_of(props), Key=log_key, Body=bytes(body))
    rsm.chunk_cache.clear()
    with pytest.raises(CorruptDataError, match="chunk 1"):
        rsm.fetch_log_segment(stored_a, 0).read()
    assert rsm.fetch_log_segment(stored_a, 0, 99_999).read() == data[:100_000]
    assert rsm.fetch_log_segment(stored_b, 0).read() == data
    rsm.close()


def test_timeouts_and_unreachable_stores_are_retriable_and_classified(
    tmp_path: Path, s3_bucket: dict[str, str], latency_proxy: Any, proxy_fault: Any
) -> None:
    lsd, data = segment_data(tmp_path / "seg", 50_000)
    props = _proxied(s3_bucket, latency_proxy) | {
        "storage.request.timeout.ms": "300",
        "storage.retry.max": "0",
        "fetch.chunk.cache.prefetch.max.size": "0",
    }
    rsm = make_rsm(props)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))

    def errors(error_class: str) -> float:
        values = [
            REGISTRY.get_sample_value(
                "tierlog_objectstore_request_errors_total",
                {"operation": operation, "error_class": error_class},
            )
            for operation in ("get", "get_range")
        ]
        return sum(v or 0.0 for v in values)

    rsm.open_segment(stored)  # manifest cached: the stalled GET is a chunk GET
    timeouts = errors("timeout")
    # two: the direct GET's, then obstore's repeat of it (``direct_get``)
    latency_proxy.inject(proxy_fault("stall", count=2, method="GET", delay_s=3.0))
    with pytest.raises(RetriableRemoteStorageException, match="timeout"):
        rsm.fetch_log_segment(stored, 0).read()
    assert errors("timeout") == timeouts + 1

    io_errors = errors("io")
    dead = make_rsm(props | {"storage.s3.endpoint.url": "http://127.0.0.1:1"})
    with pytest.raises(RetriableRemoteStorageException, match="io"):
        dead.fetch_log_segment(stored, 0).read()
    # the manifest GET and, beside it on a first touch, chunk 0's: both refused
    wait_until(lambda: errors("io") == io_errors + 2, what="both failures counted")
    rsm.close()
    dead.close()


def test_store_killed_mid_upload_then_back(
    tmp_path: Path, moto_factory: Any, proxy_factory: Any, s3_bucket_on: Any
) -> None:
    """A real server process dies during a multipart upload: the copy fails retriably; once
    a server is back on the same address the retried copy succeeds."""
    server = moto_factory()
    proxy = proxy_factory(server.port, latency_s=0.05)
    props = s3_bucket_on(server.endpoint, via=f"http://127.0.0.1:{proxy.port}")
    lsd, data = segment_data(tmp_path / "seg", 40 * MiB, compressible=False)
    rsm = make_rsm(
        props | {"chunk.size": str(MiB), "upload.part.size": str(5 * MiB), "storage.retry.max": "1"}
    )
    md = segment_metadata(len(data))
    outcome: list[BaseException | None] = []

    def copy() -> None:
        try:
            rsm.copy_log_segment_data(md, lsd)
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=copy)
    thread.start()
    poll_until(lambda: proxy.count("PUT") >= 2, 60, "the upload to start")
    server.process.kill()
    server.process.wait(10)
    thread.join(120)
    assert len(outcome) == 1 and isinstance(outcome[0], RetriableRemoteStorageException)

    revived = moto_factory(server.port)
    s3_bucket_on(revived.endpoint, bucket=_bucket_of(props))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    assert rsm.fetch_log_segment(stored, 0).read() == data
    rsm.close()
