"""Helpers for the topic-based RLMM tests: polling with a deadline and a gated topic IO."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tierlog.tiered.metadata import InMemoryMetadataTopicIO, TopicBasedRemoteLogMetadataManager


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
    io: InMemoryMetadataTopicIO,
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
