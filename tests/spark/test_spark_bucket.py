"""Planning from a bucket with many objects: the listing is walked page by page.

Real segments are uploaded with the object-store plugin to a `file://` bucket (no broker,
no Spark); the catalog is then built with a tiny page size so it walks dozens of pages.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.spark.spark_batches import Rec, build
from tests.spark.spark_plugins import object_store
from tierlog.spark import bucket
from tierlog.spark.bucket import bucket_catalog, bucket_pages
from tierlog.spark.segments import RsmSpec
from tierlog.tiered.api import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

PER_SEGMENT = 5
T0 = 1_700_000_000_000


def segment_files(directory: Path, first: int) -> tuple[LogSegmentData, int]:
    directory.mkdir(parents=True)
    log = directory / "segment.log"
    data = build([Rec(first + i, T0 + first + i, None, b"v") for i in range(PER_SEGMENT)], 0)
    log.write_bytes(data)
    for name in ("segment.index", "segment.timeindex", "segment.snapshot"):
        (directory / name).write_bytes(b"")
    lsd = LogSegmentData(
        log_segment=log,
        offset_index=directory / "segment.index",
        time_index=directory / "segment.timeindex",
        transaction_index=None,
        producer_snapshot_index=directory / "segment.snapshot",
        leader_epoch_index=b"0\n1\n0 0\n",
    )
    return lsd, len(data)


def upload(rsm: Any, tmp: Path, tip: TopicIdPartition, segments: int) -> None:
    for n in range(segments):
        first = n * PER_SEGMENT
        lsd, size = segment_files(tmp / f"{tip.topic}-{tip.partition}-{n}", first)
        md = RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
            start_offset=first,
            end_offset=first + PER_SEGMENT - 1,
            max_timestamp_ms=T0 + first + PER_SEGMENT - 1,
            broker_id=1,
            event_timestamp_ms=T0,
            segment_size_in_bytes=size,
            custom_metadata=None,
            state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
            segment_leader_epochs={0: first},
        )
        rsm.copy_log_segment_data(md, lsd)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> RsmSpec:
    """Two partitions of `wanted` (60 + 45 segments) and 30 segments of `other`."""
    root = tmp_path_factory.mktemp("paged-bucket")
    spec = RsmSpec.of("objectstore", {"storage.url": (root / "bucket").as_uri()})
    rsm = object_store(spec)
    wanted = uuid.uuid4()
    upload(rsm, root, TopicIdPartition(wanted, "wanted", 0), 60)
    upload(rsm, root, TopicIdPartition(wanted, "wanted", 1), 45)
    upload(rsm, root, TopicIdPartition(uuid.uuid4(), "other", 0), 30)
    return spec


def test_listing_comes_in_pages_of_the_asked_size(many: RsmSpec) -> None:
    pages = list(bucket_pages(object_store(many), page_size=7))
    assert sum(len(p) for p in pages) == 3 * (60 + 45 + 30)
    assert len(pages) >= 3 * 135 // 7
    assert all(len(p) <= 7 for p in pages)


def test_catalog_from_many_small_pages_has_every_segment_once(
    many: RsmSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    rsm = object_store(many)
    gets_before = rsm.backend.request_counts["get"]
    walked: list[int] = []
    gets_by_page: list[int] = []  # manifest GETs started when each page was handed over

    def counted(r: Any, page_size: int = bucket.PAGE_SIZE) -> Any:
        for page in bucket_pages(r, page_size):
            walked.append(len(page))
            gets_by_page.append(rsm.backend.request_counts["get"] - gets_before)
            yield page

    monkeypatch.setattr(bucket, "bucket_pages", counted)
    found = bucket_catalog(many, lambda topic: topic == "wanted", page_size=4)
    assert len(walked) >= 3 * 135 // 4
    assert sorted(found) == [("wanted", 0), ("wanted", 1)]
    for p, count in ((0, 60), (1, 45)):
        segs = found[("wanted", p)]
        assert [(s.first, s.last) for s in segs] == [
            (n * PER_SEGMENT, n * PER_SEGMENT + PER_SEGMENT - 1) for n in range(count)
        ]
    # the other topic's manifests were dropped from the listing, never fetched
    assert rsm.backend.request_counts["get"] - gets_before == 60 + 45
    # manifests were fetched while the listing went on, never more than the bound ahead:
    # by the last page all but that page's manifests and the in-flight ones had started
    assert gets_by_page[0] == 0
    assert gets_by_page[-1] >= 60 + 45 - 4 - bucket.MANIFEST_FETCHES
