"""Backend contract: the same expectations against file://, a real S3 server (moto over
HTTP) and a real Azure emulator (Azurite)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.storage.objectstore.config import ObjectStoreConfig
from tierlog.tiered.api import RemoteResourceNotFoundException

MiB = 1024 * 1024


@pytest.fixture(params=["file", "s3", "azure"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectBackend]:
    if request.param == "file":
        props = {"storage.url": f"file://{tmp_path}/store"}
    elif request.param == "s3":
        props = request.getfixturevalue("s3_bucket")
    else:
        props = request.getfixturevalue("azure_container")
    props = {**props, "upload.part.size": str(5 * MiB), "upload.max.concurrency": "3"}
    yield ObjectBackend.from_config(ObjectStoreConfig.from_props(props))


def test_put_then_ranged_get_returns_exact_bytes(backend: ObjectBackend) -> None:
    data = os.urandom(10_000)
    backend.put_bytes("p/a.bin", data, "log")
    assert backend.get_range("p/a.bin", 0, 10) == data[:10]
    assert backend.get_range("p/a.bin", 9_990, 10_000) == data[9_990:]
    assert backend.get_range("p/a.bin", 500, 500) == b""
    assert backend.get("p/a.bin") == data
    assert backend.head("p/a.bin") == 10_000


def test_multipart_stream_upload_of_many_parts(backend: ObjectBackend) -> None:
    pieces = [os.urandom(3 * MiB + i) for i in range(4)]  # ~12 MiB: 3 parts of 5 MiB
    written = backend.put_stream("p/big.bin", iter(pieces), "log")
    whole = b"".join(pieces)
    assert written == len(whole)
    assert backend.head("p/big.bin") == len(whole)
    boundary = 5 * MiB
    assert (
        backend.get_range("p/big.bin", boundary - 7, boundary + 7)
        == whole[boundary - 7 : boundary + 7]
    )


def test_overwrite_replaces_the_object(backend: ObjectBackend) -> None:
    backend.put_bytes("p/x", b"first", "manifest")
    backend.put_bytes("p/x", b"second!", "manifest")
    assert backend.get("p/x") == b"second!"


def test_missing_object_is_not_found(backend: ObjectBackend) -> None:
    with pytest.raises(RemoteResourceNotFoundException):
        backend.get("p/missing")
    with pytest.raises(RemoteResourceNotFoundException):
        backend.get_range("p/missing", 0, 10)
    assert backend.head("p/missing") is None


def test_delete_many_is_idempotent_and_ignores_missing_keys(backend: ObjectBackend) -> None:
    backend.put_bytes("p/1", b"1", "log")
    backend.put_bytes("p/2", b"2", "log")
    backend.delete_many(["p/1", "p/2", "p/never-existed"])
    backend.delete_many(["p/1", "p/2"])
    assert backend.head("p/1") is None and backend.head("p/2") is None


def test_delete_of_existing_keys_is_one_request_where_the_store_batches(
    backend: ObjectBackend,
) -> None:
    keys = [f"p/seg.{suffix}" for suffix in ("log", "indexes", "rsm-manifest")]
    for key in keys:
        backend.put_bytes(key, b"x", "log")
    backend.request_counts.clear()
    backend.delete_many(keys)
    assert all(backend.head(k) is None for k in keys)
    expected = {"s3": 1, "az": 1}.get(backend.scheme, 3)
    deletes = backend.request_counts["delete_batch"] + backend.request_counts["delete"]
    assert deletes == expected


def test_list_objects_under_a_prefix(backend: ObjectBackend) -> None:
    for name in ("t/0/a", "t/0/b", "t/1/c", "u/d"):
        backend.put_bytes(name, name.encode(), "manifest")
    listed = dict(backend.list_objects("t/"))
    assert sorted(listed) == ["t/0/a", "t/0/b", "t/1/c"]
    assert listed["t/1/c"] == 5
