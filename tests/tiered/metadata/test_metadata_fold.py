"""Reading a metadata partition from its log start to its end as a client, then folding."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from metadata_factories import TIP, segment, update

from tierlog.tiered.api import RemoteLogSegmentState, TopicIdPartition
from tierlog.tiered.metadata import RemoteLogMetadataTopicPartitioner, serialize
from tierlog.tiered.metadata.fold import (
    MetadataLogReader,
    fold_metadata_partitions,
    read_metadata_partition,
)

S = RemoteLogSegmentState


class ListReader(MetadataLogReader):
    """Partitions as lists of (offset, value) batches, one batch per read."""

    def __init__(
        self,
        batches: dict[int, list[list[tuple[int, bytes | None]]]],
        start: dict[int, int] | None = None,
    ) -> None:
        self.batches = batches
        self.start = start or {}
        self.reads: list[tuple[int, int]] = []

    def offsets(self, partition: int) -> tuple[int, int]:
        batches = self.batches.get(partition, [])
        end = batches[-1][-1][0] + 1 if batches else 0
        return self.start.get(partition, 0), end

    def read(
        self, partition: int, offset: int, end: int
    ) -> tuple[Sequence[tuple[int, bytes | None]], int]:
        self.reads.append((partition, offset))
        for batch in self.batches.get(partition, []):
            if batch[-1][0] >= offset:
                return batch, batch[-1][0] + 1
        return [], offset


def test_reads_from_log_start_to_end_skipping_nulls_and_earlier_records() -> None:
    reader = ListReader(
        {0: [[(0, b"a"), (1, b"b")], [(2, None), (3, b"c")], [(4, b"d")]]}, start={0: 1}
    )
    assert read_metadata_partition(reader, 0) == [b"b", b"c", b"d"]
    assert reader.reads == [(0, 1), (0, 2), (0, 4)]


def test_records_past_the_end_taken_first_are_not_read() -> None:
    class Growing(ListReader):
        def offsets(self, partition: int) -> tuple[int, int]:
            return 0, 2  # a record was appended at 2 after the end was taken

    reader = Growing({0: [[(0, b"a"), (1, b"b"), (2, b"late")]]})
    assert read_metadata_partition(reader, 0) == [b"a", b"b"]


def test_a_read_without_progress_ends_the_walk() -> None:
    class Stuck(ListReader):
        def offsets(self, partition: int) -> tuple[int, int]:
            return 0, 10

    reader = Stuck({0: [[(0, b"a")]]})
    assert read_metadata_partition(reader, 0) == [b"a"]
    assert reader.reads == [(0, 0), (0, 1)]


def test_fold_reads_only_the_metadata_partitions_the_wanted_partitions_hash_to() -> None:
    partitions = 5
    partitioner = RemoteLogMetadataTopicPartitioner(partitions)
    other = TopicIdPartition(uuid.uuid4(), "other", 3)
    mp = partitioner.metadata_partition(TIP)
    a, b = segment(0, 9), segment(10, 19)
    stray = segment(0, 4, tip=other)
    records = [
        serialize(a),
        serialize(stray),
        serialize(update(a, S.COPY_SEGMENT_FINISHED)),
        serialize(b),
    ]
    reader = ListReader({mp: [[(i, v) for i, v in enumerate(records)]]})
    caches = fold_metadata_partitions(reader, partitions, [TIP])
    assert list(caches) == [TIP]
    listed = {s.remote_log_segment_id: s.state for s in caches[TIP].list_all_remote_log_segments()}
    assert listed == {
        a.remote_log_segment_id: S.COPY_SEGMENT_FINISHED,
        b.remote_log_segment_id: S.COPY_SEGMENT_STARTED,
    }
    assert {p for p, _ in reader.reads} == {mp}
