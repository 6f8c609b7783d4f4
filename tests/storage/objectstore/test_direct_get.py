"""Chunk GETs received into reused buffers (``direct_get``), against a real S3 server
(moto) and a real Azure emulator (Azurite), with obstore taking over whatever fails."""

from __future__ import annotations

import gc
import os
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
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
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.storage.objectstore.cache import SLOT_FILE_NAME
from tierlog.storage.objectstore.config import ObjectStoreConfig
from tierlog.storage.objectstore.direct_get import DirectGetError, _PlainConnection
from tierlog.storage.objectstore.errors import ObjectStoreConfigError
from tierlog.tiered.api import RemoteResourceNotFoundException


def _fallbacks(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "tierlog_objectstore_direct_get_fallbacks_total", {"reason": reason}
    )
    return value or 0.0


@pytest.fixture(params=["s3", "azure"])
def props(request: pytest.FixtureRequest) -> dict[str, str]:
    fixture = "s3_bucket" if request.param == "s3" else "azure_container"
    return dict(request.getfixturevalue(fixture))


@pytest.fixture
def backend(props: dict[str, str]) -> Iterator[ObjectBackend]:
    b = ObjectBackend.from_config(ObjectStoreConfig.from_props(props | {"chunk.size": str(MiB)}))
    yield b
    b.close()


def test_chunk_gets_land_in_reused_buffers_with_the_exact_bytes(backend: ObjectBackend) -> None:
    assert backend.direct is not None
    data = os.urandom(3 * MiB + 5)
    backend.put_bytes("p/seg.log", data, "log")
    errors, empty = _fallbacks("error"), _fallbacks("no_buffer")
    for start, end in [(0, MiB), (MiB, 2 * MiB), (3 * MiB, 3 * MiB + 5), (7, 4096 + 3)]:
        view = backend.get_range_view("p/seg.log", start, end)
        assert bytes(view) == data[start:end]
        assert backend.direct.buffers.padded(view, backend.direct.buffers.slot_size) is not None
        view.release()
    assert (_fallbacks("error"), _fallbacks("no_buffer")) == (errors, empty)
    assert backend.direct.buffers.leased == 0


def test_a_missing_object_is_still_not_found(backend: ObjectBackend) -> None:
    with pytest.raises(RemoteResourceNotFoundException):
        backend.get_range_view("p/none.log", 0, 100)


def test_with_every_buffer_held_gets_go_to_obstore(backend: ObjectBackend) -> None:
    assert backend.direct is not None
    data = os.urandom(2 * MiB)
    backend.put_bytes("p/seg.log", data, "log")
    held = []
    while (view := backend.direct.buffers.lease(1)) is not None:
        held.append(view)
    empty = _fallbacks("no_buffer")
    assert bytes(backend.get_range_view("p/seg.log", 10, MiB)) == data[10:MiB]
    assert _fallbacks("no_buffer") == empty + 1


def test_a_failed_direct_get_is_repeated_by_obstore(
    s3_bucket: dict[str, str], latency_proxy: Any, proxy_fault: Any
) -> None:
    props = s3_bucket | {"storage.s3.endpoint.url": f"http://127.0.0.1:{latency_proxy.port}"}
    backend = ObjectBackend.from_config(ObjectStoreConfig.from_props(props))
    data = os.urandom(MiB)
    backend.put_bytes("p/seg.log", data, "log")
    for kind in ("503", "reset"):
        errors = _fallbacks("error")
        latency_proxy.reset_counts()
        latency_proxy.inject(proxy_fault(kind, count=1, method="GET"))
        assert bytes(backend.get_range_view("p/seg.log", 100, MiB)) == data[100:]
        assert _fallbacks("error") == errors + 1
        assert latency_proxy.count("GET") == 2
    backend.close()


def test_the_direct_path_is_off_behind_a_proxy_and_for_local_stores(
    s3_bucket: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = ObjectBackend.from_config(
        ObjectStoreConfig.from_props({"storage.url": f"file://{tmp_path}"})
    )
    assert local.direct is None
    off = s3_bucket | {"fetch.direct.get.enabled": "false"}
    assert ObjectBackend.from_config(ObjectStoreConfig.from_props(off)).direct is None
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert ObjectBackend.from_config(ObjectStoreConfig.from_props(s3_bucket)).direct is None


@pytest.mark.parametrize("transforms", [False, True], ids=["plain", "zstd+aes"])
def test_the_disk_cache_writes_a_chunk_from_its_pool_buffer(
    tmp_path: Path,
    s3_bucket: dict[str, str],
    rsa_key_pair: Callable[[str], Any],
    transforms: bool,
) -> None:
    """No copy into the cache's own aligned buffer: the pool's slot is the O_DIRECT source,
    the slot a chunk was received into or, with zstd + AES-GCM, the one it was decrypted
    and decompressed into. The cached chunks (in the cache's slot file) read back as the
    chunks, and every slot is free again once nothing holds them."""
    lsd, data = segment_data(tmp_path / "seg", 3 * MiB + 123)
    props = {
        "chunk.size": str(MiB),
        "fetch.chunk.cache.class": "disk",
        "fetch.chunk.cache.path": str(tmp_path / "cache"),
        "fetch.chunk.cache.prefetch.max.size": "0",
    }
    if transforms:
        pair = rsa_key_pair("decode")
        props |= {"compression.enabled": "true"}
        props |= encryption_props({"k": (pair.public, pair.private)}, "k")
    rsm = make_rsm(s3_bucket | props)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    assert rsm.fetch_log_segment(stored, 0).read() == data
    cache = tmp_path / "cache"
    wait_until(lambda: len(rsm.chunk_cache) == 4, what="the four chunks written to the disk cache")
    assert [f.name for f in cache.iterdir()] == [SLOT_FILE_NAME]
    assert rsm.chunk_cache._store._aligned is None  # type: ignore[attr-defined]
    gets = rsm.backend.request_counts["get_range"]
    assert rsm.fetch_log_segment(stored, 0).read() == data  # from the cached slots
    assert rsm.backend.request_counts["get_range"] == gets
    assert rsm.backend.direct is not None
    buffers = rsm.backend.direct.buffers
    wait_until(lambda: gc.collect() >= 0 and buffers.leased == 0, what="every slot returned")
    rsm.close()


def test_chunks_kept_by_the_memory_cache_leave_the_gets_their_buffers(
    tmp_path: Path, s3_bucket: dict[str, str]
) -> None:
    """The memory chunk cache keeps each chunk in the slot it was received into, so the
    pool is sized for the cache as well as for read-ahead: a read that fills the cache
    still receives every chunk into a slot."""
    lsd, data = segment_data(tmp_path / "seg", 8 * MiB)
    rsm = make_rsm(
        s3_bucket
        | {
            "chunk.size": str(MiB),
            "fetch.chunk.cache.class": "memory",
            "fetch.chunk.cache.size": str(8 * MiB),
            "fetch.chunk.cache.prefetch.max.size": "0",
            "fetch.chunk.cache.prefetch.total.max.size": str(2 * MiB),
            "fetch.thread.pool.size": "1",
        }
    )
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    empty = _fallbacks("no_buffer")
    assert rsm.fetch_log_segment(stored, 0).read() == data
    assert len(rsm.chunk_cache) == 8
    assert _fallbacks("no_buffer") == empty
    rsm.close()


def _one_response(head: bytes, body: bytes) -> tuple[int, threading.Thread]:
    """A server that answers one request on one connection with ``head`` + ``body``."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn, server:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            conn.sendall(head + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], thread


@pytest.mark.parametrize(
    ("head", "keeps_open"),
    [
        (
            b"HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\n"
            b"Content-Range: bytes 10-14/100\r\n\r\n",
            True,
        ),
        (
            b"HTTP/1.1 206 Partial Content\r\nConnection: close\r\nContent-Length: 5\r\n"
            b"Content-Range: bytes 10-14/100\r\n\r\n",
            False,
        ),
        (
            b"HTTP/1.0 206 Partial Content\r\nContent-Length: 5\r\n"
            b"Content-Range: bytes 10-14/100\r\n\r\n",
            False,
        ),
    ],
    ids=["keep-alive", "close", "http-1.0"],
)
def test_a_plain_get_reads_the_body_and_whether_the_connection_stays(
    head: bytes, keeps_open: bool
) -> None:
    port, thread = _one_response(head, b"hello")
    conn = _PlainConnection("127.0.0.1", port, 5.0)
    view = memoryview(bytearray(5))
    url = urllib.parse.urlsplit(f"http://127.0.0.1:{port}/b/k?sig=1")
    assert conn.get(url, "k", 10, 15, view, None) is not keeps_open
    assert bytes(view) == b"hello"
    conn.close()
    thread.join(5)


@pytest.mark.parametrize(
    ("head", "error"),
    [
        (
            b"HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n"
            b"Content-Range: bytes 10-14/100\r\n\r\n",
            "Transfer-Encoding",
        ),
        (b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n", "HTTP 503 Slow Down"),
        (
            b"HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\n"
            b"Content-Range: bytes 0-4/100\r\n\r\n",
            "Content-Range",
        ),
        (b"ICY 200 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 3000 + b"\r\n", "response head over"),
    ],
    ids=["chunked", "error-status", "wrong-range", "not-http", "head-too-large"],
)
def test_a_plain_get_refuses_what_it_does_not_expect(head: bytes, error: str) -> None:
    """Whatever is refused here is repeated by obstore (see the fallback test above)."""
    port, thread = _one_response(head, b"hello")
    conn = _PlainConnection("127.0.0.1", port, 5.0)
    url = urllib.parse.urlsplit(f"http://127.0.0.1:{port}/b/k")
    with pytest.raises(DirectGetError, match=error):
        conn.get(url, "k", 10, 15, memoryview(bytearray(5)), None)
    conn.close()
    thread.join(5)


def test_pretouch_makes_the_whole_get_pool_resident_when_configured(
    s3_bucket: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """``fetch.buffers.pretouch.enabled=true``: the plugin backs every slot of its pool
    with memory on a thread of its own after ``configure``; off by default."""
    caplog.set_level("INFO", logger="tierlog.storage.objectstore.rsm")
    props = s3_bucket | {"chunk.size": str(MiB), "fetch.chunk.cache.prefetch.total.max.size": "0"}
    plain = make_rsm(props)
    assert plain.backend.direct is not None
    plain.close()
    assert "made resident" not in caplog.text
    rsm = make_rsm(props | {"fetch.buffers.pretouch.enabled": "true"})
    assert rsm.backend.direct is not None
    pool = rsm.backend.direct.buffers
    expected = f"GET buffers: {pool.capacity * pool.slot_size >> 20} MiB made resident"
    wait_until(lambda: expected in caplog.text, what="the pool made resident")
    rsm.close()
    with pytest.raises(ObjectStoreConfigError, match=r"fetch\.buffers\.pretouch\.enabled"):
        ObjectStoreConfig.from_props(s3_bucket | {"fetch.buffers.pretouch.enabled": "maybe"})
