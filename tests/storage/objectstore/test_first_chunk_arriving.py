"""A segment's first read after a restart is served from chunk 0's bytes as its GET
receives them (``arriving``), against a real S3 server (moto) with the latency proxy
holding back the rest of that chunk's body."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from tests.helpers.object_stores import KeyPairPaths
from tests.helpers.poll import wait_until
from tests.storage.objectstore.objectstore_helpers import (
    MiB,
    encryption_props,
    finished,
    make_rsm,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.tiered.api import RemoteLogSegmentMetadata

CHUNK = MiB
#: Bytes of a response the proxy relays before it holds the rest.
RELAYED = 256 * 1024


def _uploaded(
    tmp_path: Path, s3_bucket: dict[str, str], proxy: Any
) -> tuple[dict[str, str], RemoteLogSegmentMetadata, bytes]:
    props = s3_bucket | {
        "storage.s3.endpoint.url": f"http://127.0.0.1:{proxy.port}",
        "chunk.size": str(CHUNK),
        "fetch.chunk.cache.class": "memory",
    }
    lsd, data = segment_data(tmp_path / "seg", 4 * CHUNK + 123)
    writer = make_rsm(props)
    md = segment_metadata(len(data))
    stored = finished(md, writer.copy_log_segment_data(md, lsd))
    writer.close()
    return props, stored, data


def _log_gets(proxy: Any) -> list[str | None]:
    return [r for m, path, r in proxy.entries() if m == "GET" and ".log" in path]


def _chunk_0_held(proxy: Any, fault: Any) -> None:
    proxy.reset_counts()
    proxy.inject(fault("hold", method="GET", path_contains=".log", after_bytes=RELAYED))


def _first_bytes(plugin: ObjectStoreRemoteStorageManager, md: RemoteLogSegmentMetadata) -> Any:
    """The stream at byte 0 and what its first ``read_view`` returned."""
    stream = plugin.fetch_log_segment(md, 0)
    return stream, stream.read_view(1 << 62)  # type: ignore[attr-defined]


def test_the_first_bytes_of_chunk_0_are_served_while_its_get_is_still_receiving(
    tmp_path: Path, s3_bucket: dict[str, str], latency_proxy: Any, proxy_fault: Any
) -> None:
    props, md, data = _uploaded(tmp_path, s3_bucket, latency_proxy)
    plugin = make_rsm(props)  # as after a restart: nothing cached
    try:
        _chunk_0_held(latency_proxy, proxy_fault)
        stream, first = _first_bytes(plugin, md)
        # the rest of chunk 0 is still held by the proxy, so these came from a GET in flight
        assert 0 < len(first) < RELAYED
        assert bytes(first) == data[: len(first)]
        # and read-ahead waits for that GET to end: chunk 0 is all the store was asked for
        assert _log_gets(latency_proxy) == ["bytes=0-1048575"]
        latency_proxy.release_held()
        # once that GET has ended, read-ahead starts though the reader is still in chunk 0
        wait_until(
            lambda: "bytes=1048576-2097151" in _log_gets(latency_proxy),
            what="read-ahead of chunk 1 after chunk 0's GET ended",
        )
        assert bytes(first) + stream.read() == data
        gets = _log_gets(latency_proxy)
        assert len(gets) == len(set(gets)) == 5  # each chunk once, chunk 0 included
        stream.close()
    finally:
        plugin.close()


def test_an_early_get_reaching_past_chunk_0_serves_chunk_0_only_from_it(
    tmp_path: Path,
    s3_bucket: dict[str, str],
    latency_proxy: Any,
    proxy_fault: Any,
    rsa_key_pair: Callable[[str], KeyPairPaths],
) -> None:
    """With encryption configured now but not when the segment was uploaded, the early GET
    asks for chunk 0 plus the encryption overhead, so it also holds the first bytes of
    chunk 1: those must come once, from chunk 1."""
    props, md, data = _uploaded(tmp_path, s3_bucket, latency_proxy)
    pair = rsa_key_pair("k1")
    plugin = make_rsm(props | encryption_props({"k1": (pair.public, pair.private)}, "k1"))
    try:
        _chunk_0_held(latency_proxy, proxy_fault)
        stream, first = _first_bytes(plugin, md)
        assert 0 < len(first) < RELAYED
        latency_proxy.release_held()
        assert bytes(first) + stream.read() == data
        stream.close()
    finally:
        plugin.close()


def test_a_chunk_0_get_that_fails_after_serving_its_first_bytes_is_repeated_seamlessly(
    tmp_path: Path, s3_bucket: dict[str, str], latency_proxy: Any, proxy_fault: Any
) -> None:
    props, md, data = _uploaded(tmp_path, s3_bucket, latency_proxy)
    plugin = make_rsm(props)
    errors = REGISTRY.get_sample_value(
        "tierlog_objectstore_direct_get_fallbacks_total", {"reason": "error"}
    )
    try:
        _chunk_0_held(latency_proxy, proxy_fault)
        stream, first = _first_bytes(plugin, md)
        assert 0 < len(first) < RELAYED
        latency_proxy.drop_connections()  # the chunk-0 GET dies with its body half sent
        assert bytes(first) + stream.read() == data
        assert (
            REGISTRY.get_sample_value(
                "tierlog_objectstore_direct_get_fallbacks_total", {"reason": "error"}
            )
            == (errors or 0.0) + 1
        )
        assert _log_gets(latency_proxy).count("bytes=0-1048575") == 2
        stream.close()
    finally:
        plugin.close()


def test_a_first_read_of_a_segment_with_its_manifest_resident_is_served_as_it_arrives(
    tmp_path: Path, s3_bucket: dict[str, str], latency_proxy: Any, proxy_fault: Any
) -> None:
    props, md, data = _uploaded(tmp_path, s3_bucket, latency_proxy)
    plugin = make_rsm(props)
    try:
        plugin.open_segment(md)  # the manifest resident, as after warming: no first touch
        _chunk_0_held(latency_proxy, proxy_fault)
        position = 2 * CHUNK + 10
        stream = plugin.fetch_log_segment(md, position)
        first = stream.read_view(1 << 62)  # type: ignore[attr-defined]
        # chunk 2 is still held by the proxy past its first bytes: these came as it arrived
        assert 0 < len(first) < RELAYED
        assert bytes(first) == data[position : position + len(first)]
        assert _log_gets(latency_proxy) == [f"bytes={2 * CHUNK}-{3 * CHUNK - 1}"]
        latency_proxy.release_held()
        assert bytes(first) + stream.read() == data[position:]
        gets = _log_gets(latency_proxy)
        assert len(gets) == len(set(gets)) == 3  # chunks 2, 3 and 4, each once
        stream.close()
    finally:
        plugin.close()
