"""Helpers for the topic-based RLMM tests: polling with a deadline and a gated topic IO."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.tiered.metadata.metadata_factories import segment, update
from tierlog.tiered.api import RemoteLogSegmentState as S
from tierlog.tiered.api import TopicIdPartition
from tierlog.tiered.metadata import (
    InMemoryMetadataTopicIO,
    MetadataTopicIO,
    PartitionSnapshot,
    TopicBasedRemoteLogMetadataManager,
)

TIPS = [TopicIdPartition(uuid.UUID(int=0xA000 + i), f"topic{i % 3}", i) for i in range(6)]


def wait_until(pred: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class GatedTopicIO(InMemoryMetadataTopicIO):
    """Reads block while the gate is closed: holds a replay in progress on demand."""

    def __init__(self, max_batch: int = 2000) -> None:
        super().__init__(max_batch)
        self.gate = threading.Event()
        self.gate.set()
        self.reads_blocked = threading.Event()

    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        if not self.gate.is_set():
            self.reads_blocked.set()
            self.gate.wait()
        return super().read(partition, from_offset)


def make_rlmm(
    io: MetadataTopicIO,
    snapshot_dir: Path | None,
    extra: Mapping[str, str] | None = None,
) -> TopicBasedRemoteLogMetadataManager:
    props = {
        "remote.log.metadata.topic.num.partitions": "5",
        "remote.log.metadata.consume.wait.ms": "10000",
        "remote.log.metadata.consume.poll.interval.ms": "20",
        "broker.id": "0",
    }
    if snapshot_dir is None:
        props["remote.log.metadata.snapshot.enable"] = "false"
    else:
        props["remote.log.metadata.snapshot.dir"] = str(snapshot_dir)
    props.update(extra or {})
    rlmm = TopicBasedRemoteLogMetadataManager(io)
    rlmm.configure(props)
    rlmm.await_initialized(10)
    return rlmm


def populate(rlmm: TopicBasedRemoteLogMetadataManager, per_partition: int = 8) -> None:
    """Several segments per user partition through every state, several leaders/epochs."""
    for tip in TIPS:
        for i in range(per_partition):
            start = i * 100
            m = segment(start, start + 99, {i // 3: start}, tip=tip, size=100 + i)
            rlmm.add_remote_log_segment_metadata(m).result(5)
            if i % 4 != 3:
                rlmm.update_remote_log_segment_metadata(
                    update(m, S.COPY_SEGMENT_FINISHED, custom=b"k%d" % i)
                ).result(5)
            if i < 2:
                rlmm.update_remote_log_segment_metadata(update(m, S.DELETE_SEGMENT_STARTED)).result(
                    5
                )
            if i == 0:
                rlmm.update_remote_log_segment_metadata(
                    update(m, S.DELETE_SEGMENT_FINISHED)
                ).result(5)
        # a successive leader re-uploads an overlapping range: supersedes segment 2
        dup = segment(200, 350, {0: 200, 9: 300}, tip=tip)
        rlmm.add_remote_log_segment_metadata(dup).result(5)
        rlmm.update_remote_log_segment_metadata(update(dup, S.COPY_SEGMENT_FINISHED)).result(5)


def state(rlmm: TopicBasedRemoteLogMetadataManager) -> dict[TopicIdPartition, PartitionSnapshot]:
    return {t: rlmm.partition_snapshot(t) for t in TIPS}
