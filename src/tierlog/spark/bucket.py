"""Planning with no broker at all: the bucket's own manifests are the remote catalog.

The object-store plugin writes a self-describing `.rsm-manifest` last for every segment
(docs/remote-format.md §5), holding the segment's metadata. When the broker is down (or
the job is told to ignore it), listing the manifests under the configured prefix rebuilds
what `__remote_log_metadata` would have said: a manifest exists only once all three
objects were uploaded, so every listed segment is complete and readable.

What this view cannot know, and how the plan copes:
  * the hot tail (still on the broker's disk) and anything past the last uploaded offset
    do not exist here: `latest` means the end of the remote data, and asking for more is
    data loss (`failOnDataLoss` decides);
  * a segment the broker has started deleting may still be listed: it is read if its
    objects are still there, and otherwise the executor reports the range as lost;
  * a copy retried under a new segment id leaves two manifests for the same offsets: the
    planner's overlap rule reads each offset from one of them only.

The listing is walked page by page and manifests are fetched while it goes on; objects
of topics the job does not read are dropped as they are listed, so a large bucket costs
the driver memory for the wanted segments only.

Each rebuilt metadata carries the manifest's own key prefix as custom metadata, so the
plugin finds the objects where they are even if `storage.url` or the hash mask changed.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tierlog.spark.options import TP, OptionError
from tierlog.spark.planning import ColdSegment
from tierlog.spark.segments import RemoteSegmentRef, RsmSpec, storage_plugin
from tierlog.tiered.api import CustomMetadata, RemoteLogSegmentMetadata

if TYPE_CHECKING:
    from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager

log = logging.getLogger(__name__)

MANIFEST_SUFFIX = ".rsm-manifest"
_SEGMENT_SUFFIXES = (".log", ".indexes", MANIFEST_SUFFIX)  # a segment's three objects
_ID_LEN = 22  # Kafka's Uuid.toString(): URL-safe base64, no padding


@dataclass(frozen=True)
class ListedObject:
    key: str
    size: int


@dataclass(frozen=True)
class BucketSegment:
    """A segment found through its manifest; `stored_size` sums its listed objects."""

    manifest_key: str
    metadata: RemoteLogSegmentMetadata
    stored_size: int


def object_store(spec: RsmSpec) -> ObjectStoreRemoteStorageManager:
    """The configured plugin, which must be the object store: only its bucket describes
    itself. (The directory plugin keeps no metadata next to its files.)"""
    from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager

    rsm = storage_plugin(spec)
    if not isinstance(rsm, ObjectStoreRemoteStorageManager):
        raise OptionError(
            f"reading without a broker needs the object-store plugin (self-describing "
            f"manifests); the configured plugin is {spec.class_name!r}"
        )
    return rsm


#: Objects per listing page. S3 and GCS answer at most 1,000 keys per request, so larger
#: pages only batch the Python side; smaller ones (tests) walk many pages.
PAGE_SIZE = 1000


def bucket_pages(
    rsm: ObjectStoreRemoteStorageManager, page_size: int = PAGE_SIZE
) -> Iterator[list[ListedObject]]:
    """The objects under the plugin's prefix, one page at a time as the store returns
    them (in no promised order): a bucket of millions of keys is never held at once."""
    import obstore

    from tierlog.storage.objectstore.errors import translate

    prefix = rsm.config.key_prefix or None
    try:
        for page in obstore.list(rsm.backend.store, prefix, chunk_size=page_size):
            yield [ListedObject(str(m["path"]), int(m["size"])) for m in page]
    except Exception as exc:
        raise translate(exc, f"list {prefix or '/'}") from exc


def iter_bucket(
    rsm: ObjectStoreRemoteStorageManager, page_size: int = PAGE_SIZE
) -> Iterator[ListedObject]:
    for page in bucket_pages(rsm, page_size):
        yield from page


def list_bucket(rsm: ObjectStoreRemoteStorageManager) -> list[ListedObject]:
    """Every object under the plugin's prefix (the audit joins the whole listing)."""
    return list(iter_bucket(rsm))


def topic_of_key(key: str) -> str | None:
    """The topic name in `.../<topic>-<topicId>/<partition>/<name>`, or None for keys of
    another shape and for shortened long names (`~crc` tagged), which need the manifest."""
    parts = key.split("/")
    if len(parts) < 3 or not parts[-2].isdigit():
        return None
    topic_dir = parts[-3]
    if len(topic_dir) <= _ID_LEN + 1 or topic_dir[-_ID_LEN - 1] != "-":
        return None
    name = topic_dir[: -_ID_LEN - 1]
    return None if "~" in name else name


def located(md: RemoteLogSegmentMetadata, manifest_key: str, stored: int) -> BucketSegment:
    """Attach custom metadata that points the plugin at the prefix the manifest was found
    under (hash directory included, mask 0), whatever the current configuration says."""
    from tierlog.storage.objectstore.custom_metadata import SegmentLocation
    from tierlog.storage.objectstore.layout import partition_dir

    base = manifest_key[: -len(MANIFEST_SUFFIX)]
    pdir = partition_dir(md.topic_id_partition)
    at = base.rfind(pdir)
    if at < 0:
        return BucketSegment(manifest_key, md, stored)
    location = SegmentLocation(base[:at], 0, stored)
    md = replace(md, custom_metadata=CustomMetadata(location.encode()))
    return BucketSegment(manifest_key, md, stored)


#: Manifest GETs in flight while the listing continues: bounds memory and connections.
MANIFEST_FETCHES = 16


def read_manifests(
    rsm: ObjectStoreRemoteStorageManager,
    listing: Iterable[ListedObject],
    keep_topic: Callable[[str], bool] | None = None,
    *,
    on_error: Callable[[str, Exception], None] | None = None,
) -> list[BucketSegment]:
    """Fetch and parse the manifests in `listing` while it streams in.

    Objects of topics `keep_topic` rejects are dropped as they are listed (their key names
    the topic), so what is held is the wanted segments' sizes and manifests, never the
    listing. Manifest GETs overlap the listing, at most `MANIFEST_FETCHES` at a time. A
    manifest that cannot be read or parsed is skipped and reported to `on_error` (the audit
    job lists them); without `on_error` it fails the call.
    """
    from tierlog.storage.objectstore.manifest import SegmentManifest, metadata_from_json

    sizes: dict[str, int] = defaultdict(int)  # segment base key -> its objects' bytes

    def load(key: str) -> RemoteLogSegmentMetadata | None:
        try:
            manifest = SegmentManifest.from_json_bytes(rsm.backend.get(key, "manifest"))
            return metadata_from_json(manifest.segment)
        except Exception as exc:
            if on_error is None:
                raise OptionError(f"manifest {key} cannot be read: {exc}") from exc
            on_error(key, exc)
            return None

    slots = threading.BoundedSemaphore(MANIFEST_FETCHES)
    pending: list[tuple[str, Future[RemoteLogSegmentMetadata | None]]] = []
    with ThreadPoolExecutor(8, thread_name_prefix="tierlog-manifests") as pool:
        try:
            for o in listing:
                suffix = next((x for x in _SEGMENT_SUFFIXES if o.key.endswith(x)), None)
                if suffix is None:
                    continue
                if keep_topic is not None:
                    topic = topic_of_key(o.key)
                    if topic is not None and not keep_topic(topic):
                        continue
                sizes[o.key[: -len(suffix)]] += o.size
                if suffix == MANIFEST_SUFFIX:
                    slots.acquire()
                    future = pool.submit(load, o.key)
                    future.add_done_callback(lambda _: slots.release())
                    pending.append((o.key, future))
        except BaseException:
            for _, future in pending:
                future.cancel()
            raise
        loaded = [(key, future.result()) for key, future in pending]
    found = [
        located(md, key, sizes[key[: -len(MANIFEST_SUFFIX)]])
        for key, md in loaded
        if md is not None
    ]
    if keep_topic is not None:
        found = [s for s in found if keep_topic(s.metadata.topic_id_partition.topic)]
    return found


def newest_topic_ids(segments: list[BucketSegment]) -> list[BucketSegment]:
    """A deleted and re-created topic may leave segments under its old id; offsets restart
    with the new id, so only the id with the most recent upload is kept per name."""
    newest: dict[str, tuple[int, object]] = {}
    for s in segments:
        tip = s.metadata.topic_id_partition
        seen = newest.get(tip.topic)
        if seen is None or s.metadata.event_timestamp_ms > seen[0]:
            newest[tip.topic] = (s.metadata.event_timestamp_ms, tip.topic_id)
    kept = [
        s
        for s in segments
        if newest[s.metadata.topic_id_partition.topic][1] == s.metadata.topic_id_partition.topic_id
    ]
    if len(kept) != len(segments):
        log.warning(
            "ignoring %d segments of older ids of re-created topics", len(segments) - len(kept)
        )
    return kept


def bucket_catalog(
    spec: RsmSpec, keep_topic: Callable[[str], bool], page_size: int = PAGE_SIZE
) -> dict[TP, list[ColdSegment]]:
    """COPY_FINISHED-equivalent segments per partition, from the bucket alone."""
    rsm = object_store(spec)
    segments = newest_topic_ids(read_manifests(rsm, iter_bucket(rsm, page_size), keep_topic))
    out: dict[TP, list[ColdSegment]] = {}
    for s in segments:
        md = s.metadata
        tip = md.topic_id_partition
        out.setdefault((tip.topic, tip.partition), []).append(
            ColdSegment(
                md.start_offset,
                md.end_offset,
                md.segment_size_in_bytes,
                RemoteSegmentRef.of(spec, md),
            )
        )
    for segs in out.values():
        segs.sort(key=lambda c: (c.first, c.last))
    return out
