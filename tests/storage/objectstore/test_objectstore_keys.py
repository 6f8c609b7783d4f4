"""Key rotation and ``tierlog keys rewrap``; plus the plugin's other edge cases on file://."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.storage.objectstore.objectstore_helpers import (
    encryption_props,
    finished,
    make_rsm,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.storage.objectstore.errors import CorruptDataError, ObjectStoreConfigError
from tierlog.storage.objectstore.keyring import KeyRing
from tierlog.storage.objectstore.manifest import SegmentManifest, metadata_from_json
from tierlog.storage.objectstore.rewrap import main as rewrap_main
from tierlog.storage.objectstore.rewrap import rewrap_manifests
from tierlog.tiered.api import (
    RSM_ALIASES,
    RSM_PROPS_PREFIX,
    RemoteStorageException,
    RemoteStorageManager,
    load_plugin,
)


def _ring(rsa_key_pair: Callable[[str], Any], *ids: str) -> dict[str, tuple[Path, Path]]:
    return {i: (rsa_key_pair(i).public, rsa_key_pair(i).private) for i in ids}


def _manifest_of(rsm: ObjectStoreRemoteStorageManager, stored: Any) -> SegmentManifest:
    return SegmentManifest.from_json_bytes(rsm.backend.get(rsm.keys_for(stored).manifest))


def _key_id(rsm: ObjectStoreRemoteStorageManager, stored: Any) -> str:
    encryption = _manifest_of(rsm, stored).encryption
    assert encryption is not None
    return encryption.key_id


def test_rotation_keeps_old_segments_readable_and_rewrap_moves_them_to_the_new_key(
    tmp_path: Path, rsa_key_pair: Callable[[str], Any]
) -> None:
    url = {"storage.url": f"file://{tmp_path}/remote", "chunk.size": "50000"}
    lsd, data = segment_data(tmp_path / "seg", 180_000)
    old = make_rsm(url | encryption_props(_ring(rsa_key_pair, "k1"), "k1"))
    md_a = segment_metadata(len(data))
    stored_a = finished(md_a, old.copy_log_segment_data(md_a, lsd))
    old.close()

    rotated = make_rsm(url | encryption_props(_ring(rsa_key_pair, "k1", "k2"), "k2"))
    md_b = segment_metadata(len(data), partition=1)
    stored_b = finished(md_b, rotated.copy_log_segment_data(md_b, lsd))
    assert _key_id(rotated, stored_a) == "k1"
    assert _key_id(rotated, stored_b) == "k2"
    assert rotated.fetch_log_segment(stored_a, 0).read() == data
    log_before = Path(next((tmp_path / "remote").rglob("*.log"))).read_bytes()

    keyring = KeyRing.from_files(rotated.config.encryption_key_pairs, "k2")
    report = rewrap_manifests(rotated.backend, keyring, "")
    assert (report.scanned, report.rewrapped, report.already_active) == (2, 1, 1)
    assert report.failed == []
    assert _key_id(rotated, stored_a) == "k2"
    assert Path(next((tmp_path / "remote").rglob("*.log"))).read_bytes() == log_before
    rotated.close()

    # the old key can now be dropped from the ring
    only_new = make_rsm(url | encryption_props(_ring(rsa_key_pair, "k2"), "k2"))
    assert only_new.fetch_log_segment(stored_a, 0).read() == data
    assert only_new.fetch_log_segment(stored_b, 0).read() == data
    again = rewrap_manifests(only_new.backend, keyring, "")
    assert again.rewrapped == 0 and again.already_active == 2
    only_new.close()


def test_reading_without_the_wrapping_key_is_a_clear_error(
    tmp_path: Path, rsa_key_pair: Callable[[str], Any]
) -> None:
    url = {"storage.url": f"file://{tmp_path}/remote"}
    lsd, data = segment_data(tmp_path / "seg", 10_000)
    writer = make_rsm(url | encryption_props(_ring(rsa_key_pair, "k1"), "k1"))
    md = segment_metadata(len(data))
    stored = finished(md, writer.copy_log_segment_data(md, lsd))
    reader = make_rsm(url | encryption_props(_ring(rsa_key_pair, "k2"), "k2"))
    with pytest.raises(RemoteStorageException, match=r"'k1'.*not in the key ring"):
        reader.fetch_log_segment(stored, 0)
    writer.close()
    reader.close()


def test_rewrap_command_line(tmp_path: Path, rsa_key_pair: Callable[[str], Any]) -> None:
    url = {"storage.url": f"file://{tmp_path}/remote"}
    lsd, data = segment_data(tmp_path / "seg", 10_000)
    writer = make_rsm(url | encryption_props(_ring(rsa_key_pair, "k1"), "k1"))
    md = segment_metadata(len(data))
    stored = finished(md, writer.copy_log_segment_data(md, lsd))
    writer.close()
    props = url | encryption_props(_ring(rsa_key_pair, "k1", "k2"), "k2")
    config = tmp_path / "server.properties"
    config.write_text(
        "# broker\nnode.id=1\n" + "".join(f"rsm.config.{k}={v}\n" for k, v in props.items())
    )
    assert rewrap_main(["--config", str(config), "--dry-run"]) == 0
    reader = make_rsm(props)
    assert _key_id(reader, stored) == "k1"
    assert rewrap_main(["--config", str(config)]) == 0
    assert _key_id(reader, stored) == "k2"
    reader.close()


def test_tampered_compressed_chunk_without_encryption_is_corrupt(tmp_path: Path) -> None:
    rsm = make_rsm(
        {
            "storage.url": f"file://{tmp_path}/remote",
            "chunk.size": "100000",
            "compression.enabled": "true",
            "fetch.chunk.cache.prefetch.max.size": "0",
        }
    )
    lsd, data = segment_data(tmp_path / "seg", 300_000)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    log_file = next((tmp_path / "remote").rglob("*.log"))
    raw = bytearray(log_file.read_bytes())
    start, end = rsm.open_segment(stored).manifest.chunk_index.stored_range(2)
    raw[start + 4 : end] = bytes(end - start - 4)  # garbage after the zstd magic
    log_file.write_bytes(bytes(raw))
    with pytest.raises(CorruptDataError, match="chunk 2"):
        rsm.fetch_log_segment(stored, 250_000).read()
    assert rsm.fetch_log_segment(stored, 0, 199_999).read() == data[:200_000]
    rsm.close()


def test_another_segments_objects_under_a_segments_keys_are_refused(tmp_path: Path) -> None:
    # a botched restore copies topic a's segment over topic b's keys: b's reader must not be
    # handed a's records, however valid they are as objects
    rsm = make_rsm({"storage.url": f"file://{tmp_path}/remote"})
    lsd_a, data_a = segment_data(tmp_path / "a", 5000, seed=1)
    lsd_b, data_b = segment_data(tmp_path / "b", 5000, seed=2)
    md_a0 = segment_metadata(len(data_a), topic="a")
    md_a = finished(md_a0, rsm.copy_log_segment_data(md_a0, lsd_a))
    md_b0 = segment_metadata(len(data_b), topic="b")
    md_b = finished(md_b0, rsm.copy_log_segment_data(md_b0, lsd_b))
    keys_a, keys_b = rsm.keys_for(md_a), rsm.keys_for(md_b)
    root = tmp_path / "remote"
    for src, dst in zip(keys_a.all(), keys_b.all(), strict=True):
        (root / dst).write_bytes((root / src).read_bytes())
    rsm.manifest_cache.clear()
    with pytest.raises(CorruptDataError, match="belongs to another segment"):
        rsm.fetch_log_segment(md_b, 0).read()
    rsm.close()


def test_manifest_alone_rebuilds_the_segment_metadata(tmp_path: Path) -> None:
    rsm = make_rsm({"storage.url": f"file://{tmp_path}/remote"})
    lsd, data = segment_data(tmp_path / "seg", 5000)
    md = segment_metadata(len(data), topic="payments", partition=4, start_offset=7000)
    rsm.copy_log_segment_data(md, lsd)
    manifest_file = next((tmp_path / "remote").rglob("*.rsm-manifest"))
    rebuilt = metadata_from_json(
        SegmentManifest.from_json_bytes(manifest_file.read_bytes()).segment
    )
    assert rebuilt.remote_log_segment_id == md.remote_log_segment_id
    assert (rebuilt.start_offset, rebuilt.end_offset, rebuilt.segment_size_in_bytes) == (
        md.start_offset,
        md.end_offset,
        md.segment_size_in_bytes,
    )
    # and the segment is readable with that metadata (no custom metadata needed)
    assert rsm.fetch_log_segment(rebuilt, 0).read() == data
    rsm.close()


def test_fetch_positions_outside_the_segment(tmp_path: Path) -> None:
    rsm = make_rsm({"storage.url": f"file://{tmp_path}/remote"})
    lsd, data = segment_data(tmp_path / "seg", 5000)
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    assert rsm.fetch_log_segment(stored, len(data)).read() == b""
    assert rsm.fetch_log_segment(stored, 4990, 10**9).read() == data[4990:]
    with pytest.raises(RemoteStorageException):
        rsm.fetch_log_segment(stored, 10, 5)
    with pytest.raises(RemoteStorageException):
        rsm.fetch_log_segment(stored, -1)
    rsm.close()


def test_loadable_by_alias_with_prefixed_broker_props(tmp_path: Path) -> None:
    rsm = load_plugin(
        "objectstore",
        RemoteStorageManager,  # type: ignore[type-abstract]
        RSM_ALIASES,
        {f"{RSM_PROPS_PREFIX}storage.url": f"file://{tmp_path}/r", "unrelated.key": "x"},
        RSM_PROPS_PREFIX,
    )
    assert isinstance(rsm, ObjectStoreRemoteStorageManager)
    rsm.close()


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({}, "storage.url"),
        ({"storage.url": "ftp://x/y"}, "storage.url"),
        ({"storage.url": "s3://b/p", "upload.part.size": "1000"}, "upload.part.size"),
        ({"storage.url": "file:///x", "fetch.chunk.cache.class": "disk"}, "fetch.chunk.cache.path"),
        ({"storage.url": "file:///x", "encryption.enabled": "true"}, "encryption.key.pair.id"),
        ({"storage.url": "file:///x", "chunk.size": "abc"}, "chunk.size"),
        ({"storage.url": "s3://b/" + "p" * 120}, "storage.url"),
        ({"storage.url": "gs://b/p", "storage.option.no_such_option": "1"}, "storage.url"),
    ],
)
def test_bad_config_names_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ObjectStoreConfigError, match=key.replace(".", r"\.")):
        ObjectStoreRemoteStorageManager().configure(props)
