"""Planning with no broker at all: the bucket's own manifests are the remote catalog.

A storage plugin with ``SupportsSegmentManifests`` (the object store: docs/remote-format.md
§5) writes a self-describing manifest last for every segment, holding its metadata. When
the broker is down (or the job is told to ignore it), listing the manifests through the
plugin rebuilds what `__remote_log_metadata` would have said: a manifest exists only once
all the segment's objects were stored, so every listed segment is complete and readable.

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

Each rebuilt metadata is pointed by the plugin (``found_at``) at where its manifest was
listed, so the objects are read where they are even if the plugin's settings changed.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from tierlog.spark.options import TP, OptionError
from tierlog.spark.planning import ColdSegment
from tierlog.spark.segments import RemoteSegmentRef, RsmSpec, storage_plugin
from tierlog.tiered.api import (
    ObjectKind,
    RemoteLogSegmentMetadata,
    StoredObject,
    SupportsSegmentManifests,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BucketSegment:
    """A segment found through its manifest; `stored_size` sums its listed objects."""

    manifest_key: str
    metadata: RemoteLogSegmentMetadata
    stored_size: int


def manifest_plugin(spec: RsmSpec) -> SupportsSegmentManifests:
    """The configured plugin, which must keep a manifest per segment
    (``SupportsSegmentManifests``): only then does the store describe itself."""
    rsm = storage_plugin(spec)
    if not isinstance(rsm, SupportsSegmentManifests):
        raise OptionError(
            f"reading without a broker needs a storage plugin whose segments describe "
            f"themselves (self-describing manifests); the configured plugin is "
            f"{spec.class_name!r}"
        )
    return rsm


#: Objects per listing page. S3 and GCS answer at most 1,000 keys per request, so larger
#: pages only batch the Python side; smaller ones (tests) walk many pages.
PAGE_SIZE = 1000


def bucket_pages(
    plugin: SupportsSegmentManifests, page_size: int = PAGE_SIZE
) -> Iterator[list[StoredObject]]:
    """The plugin's objects, one page at a time as the store returns them (in no promised
    order): a bucket of millions of keys is never held at once."""
    return plugin.list_objects(page_size)


def iter_bucket(
    plugin: SupportsSegmentManifests, page_size: int = PAGE_SIZE
) -> Iterator[StoredObject]:
    for page in bucket_pages(plugin, page_size):
        yield from page


#: Manifest GETs in flight while the listing continues: bounds memory and connections.
MANIFEST_FETCHES = 16


def read_manifests(
    plugin: SupportsSegmentManifests,
    listing: Iterable[StoredObject],
    keep_topic: Callable[[str], bool] | None = None,
    *,
    on_error: Callable[[str, Exception], None] | None = None,
) -> list[BucketSegment]:
    """Fetch and parse the manifests in `listing` while it streams in.

    Objects of topics `keep_topic` rejects are dropped as they are listed (when their key
    names the topic), so what is held is the wanted segments' sizes and manifests, never the
    listing. Manifest GETs overlap the listing, at most `MANIFEST_FETCHES` at a time. A
    manifest that cannot be read or parsed is skipped and reported to `on_error`; without
    `on_error` it fails the call.
    """
    sizes: dict[str, int] = defaultdict(int)  # segment key -> its objects' bytes

    def load(key: str) -> RemoteLogSegmentMetadata | None:
        try:
            return plugin.read_manifest(key).metadata
        except Exception as exc:
            if on_error is None:
                raise OptionError(f"manifest {key} cannot be read: {exc}") from exc
            on_error(key, exc)
            return None

    slots = threading.BoundedSemaphore(MANIFEST_FETCHES)
    pending: list[tuple[str, str, Future[RemoteLogSegmentMetadata | None]]] = []
    with ThreadPoolExecutor(8, thread_name_prefix="tierlog-manifests") as pool:
        try:
            for o in listing:
                found = plugin.identify(o.key)
                if found is None:
                    continue
                topic = found.topic
                if keep_topic is not None and topic is not None and not keep_topic(topic):
                    continue
                sizes[found.segment_key] += o.size
                if found.kind is ObjectKind.MANIFEST:
                    slots.acquire()
                    future = pool.submit(load, o.key)
                    future.add_done_callback(lambda _: slots.release())
                    pending.append((o.key, found.segment_key, future))
        except BaseException:
            for _, _, future in pending:
                future.cancel()
            raise
        loaded = [(key, base, future.result()) for key, base, future in pending]
    found_segments = [
        BucketSegment(key, plugin.found_at(md, key, sizes[base]), sizes[base])
        for key, base, md in loaded
        if md is not None
    ]
    if keep_topic is not None:
        found_segments = [
            s for s in found_segments if keep_topic(s.metadata.topic_id_partition.topic)
        ]
    return found_segments


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
    plugin = manifest_plugin(spec)
    segments = newest_topic_ids(read_manifests(plugin, iter_bucket(plugin, page_size), keep_topic))
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
