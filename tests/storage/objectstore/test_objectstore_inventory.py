"""The object store's inventory (``SupportsSegmentManifests``): what each key is, where a
segment's objects are, and what its manifest records, on a ``file://`` bucket."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from tests.storage.objectstore.objectstore_helpers import (
    finished,
    make_rsm,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore.layout import identify_key
from tierlog.tiered.api import (
    ObjectKind,
    SegmentObject,
    SupportsInventory,
    SupportsReadAhead,
    SupportsSegmentManifests,
)


def test_keys_map_to_topic_id_partition_segment_and_kind(tmp_path: Path) -> None:
    rsm = make_rsm({"storage.url": f"file://{tmp_path}/bucket/tiered/", "key.prefix.mask": "0xff"})
    assert isinstance(rsm, SupportsSegmentManifests) and isinstance(rsm, SupportsInventory)
    assert isinstance(rsm, SupportsReadAhead)
    lsd, data = segment_data(tmp_path / "seg", 20_000)
    md = segment_metadata(len(data), topic="orders", partition=7, start_offset=1234)
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    listed = [o for page in rsm.list_objects(page_size=2) for o in page]
    assert sorted(o.key for o in listed) == sorted(rsm.required_keys(stored))
    tip = md.topic_id_partition
    kinds = {}
    for o in listed:
        found = rsm.identify(o.key)
        assert found is not None
        assert (found.topic_id, found.topic, found.partition) == (tip.topic_id, "orders", 7)
        assert found.segment_id == md.remote_log_segment_id.id
        assert found.segment_key == rsm.segment_key(stored)
        kinds[found.kind] = o.size
    assert set(kinds) == {ObjectKind.LOG, ObjectKind.INDEX, ObjectKind.MANIFEST}
    assert rsm.metadata_sizes(stored) == {}
    assert rsm.recorded_size(stored) == sum(kinds.values())

    manifest_key = rsm.keys_for(stored).manifest
    contents = rsm.read_manifest(manifest_key)
    assert contents.metadata.remote_log_segment_id == md.remote_log_segment_id
    assert (contents.metadata.start_offset, contents.metadata.end_offset) == (1234, 1333)
    assert contents.sizes == {k: kinds[k] for k in (ObjectKind.LOG, ObjectKind.INDEX)}
    assert rsm.recorded_size(stored) == sum(contents.sizes.values()) + kinds[ObjectKind.MANIFEST]

    assert all(rsm.has_object(k) for k in rsm.required_keys(stored))
    rsm.delete_objects([*rsm.required_keys(stored), "never/there.log"])
    assert not any(rsm.has_object(k) for k in rsm.required_keys(stored))
    rsm.close()


def test_found_at_reads_the_objects_where_the_manifest_was_listed(tmp_path: Path) -> None:
    writer = make_rsm({"storage.url": f"file://{tmp_path}/bucket/old/", "key.prefix.mask": "0xf"})
    lsd, data = segment_data(tmp_path / "seg", 20_000)
    md = segment_metadata(len(data))
    writer.copy_log_segment_data(md, lsd)
    writer.close()
    reader = make_rsm({"storage.url": f"file://{tmp_path}/bucket/"})
    (manifest,) = [
        o for page in reader.list_objects() for o in page if o.key.endswith(".rsm-manifest")
    ]
    contents = reader.read_manifest(manifest.key)
    here = reader.found_at(contents.metadata, manifest.key, 12345)
    assert reader.recorded_size(here) == 12345
    assert reader.segment_key(here) + ".rsm-manifest" == manifest.key
    assert reader.fetch_log_segment(here, 0).read() == data
    reader.close()


def test_topic_is_read_from_object_keys_without_fetching_manifests() -> None:
    tid, sid = "Op8sHgAAQACAAAAAAACrzQ", "8WaXwyQvTbuZKUbd-v6yTA"
    key = f"tiered/51/orders-{tid}/7/00000000000000001234-{sid}.log"
    found = identify_key(key)
    assert found == SegmentObject(
        topic_id=uuid.UUID(bytes=base64.urlsafe_b64decode(tid + "==")),
        partition=7,
        segment_id=uuid.UUID(bytes=base64.urlsafe_b64decode(sid + "==")),
        kind=ObjectKind.LOG,
        segment_key=key[: -len(".log")],
        topic="orders",
    )
    manifest = identify_key(f"my-topic-{tid}/0/{0:020d}-{sid}.rsm-manifest")
    assert manifest is not None and manifest.topic == "my-topic"
    assert manifest.kind is ObjectKind.MANIFEST
    shortened = identify_key(f"abc~0011aabb-{tid}/0/{0:020d}-{sid}.indexes")
    assert shortened is not None and shortened.topic is None  # shortened: the manifest knows
    assert shortened.kind is ObjectKind.INDEX
    assert identify_key("stray-file") is None
    assert identify_key(f"exports/orders-{tid}/0/x.log") is None
    assert identify_key(f"orders-{tid}/0/{0:020d}-{sid}.csv") is None
