"""Shared builders for the manager tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator

from helpers import poll
from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

TIP = TopicIdPartition(uuid.UUID(int=7), "orders", 0)


def seg(
    start: int,
    end: int,
    epochs: dict[int, int] | None = None,
    *,
    size: int = 1024,
    max_ts: int = 0,
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=max_ts,
        broker_id=0,
        event_timestamp_ms=0,
        segment_size_in_bytes=size,
        custom_metadata=None,
        state=state,
        segment_leader_epochs=epochs or {0: start},
    )


def by_epoch(
    segments: Iterable[RemoteLogSegmentMetadata],
) -> tuple[list[RemoteLogSegmentMetadata], Callable[[int], Iterator[RemoteLogSegmentMetadata]]]:
    listed = [s for s in segments if s.state is not RemoteLogSegmentState.DELETE_SEGMENT_FINISHED]

    def for_epoch(epoch: int) -> Iterator[RemoteLogSegmentMetadata]:
        return iter(
            sorted(
                (s for s in listed if epoch in s.segment_leader_epochs),
                key=lambda s: s.start_offset,
            )
        )

    return listed, for_epoch


# --- a real tiering stack in one process ----------------------------------------------

from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from tierlog.log import LogConfig, PartitionLog, TopicPartition  # noqa: E402
from tierlog.protocol.records import SimpleRecord, build_batch  # noqa: E402
from tierlog.storage.directory import DirectoryRemoteStorageManager  # noqa: E402
from tierlog.tiered.manager import (  # noqa: E402
    RemoteLogManager,
    RemoteLogManagerConfig,
    RemoteMetrics,
)
from tierlog.tiered.metadata import (  # noqa: E402
    InMemoryMetadataTopicIO,
    TopicBasedRemoteLogMetadataManager,
)

DEADLINE_S = 20.0


def wait_until(cond: Callable[[], object], what: str, timeout_s: float = DEADLINE_S) -> None:
    poll.wait_until(cond, timeout_s=timeout_s, interval_s=0.01, what=what)


@dataclass
class Stack:
    root: Path
    log: PartitionLog
    rsm: DirectoryRemoteStorageManager
    rlmm: TopicBasedRemoteLogMetadataManager
    rlm: RemoteLogManager
    metrics: RemoteMetrics
    next_ts: list[int] = field(default_factory=lambda: [1_000])
    topic_io: InMemoryMetadataTopicIO = field(default_factory=InMemoryMetadataTopicIO)

    @property
    def tp(self) -> TopicPartition:
        return self.log.tp

    def produce(self, n: int, *, per_segment: int | None = None, epoch: int = 0) -> None:
        """Append ``n`` one-record batches, rolling after every ``per_segment`` of them."""
        for i in range(n):
            ts = self.next_ts[0]
            self.next_ts[0] += 1
            value = f"v{self.log.log_end_offset}".encode()
            self.log.append_as_leader(
                build_batch([SimpleRecord(value, timestamp=ts)]),
                leader_epoch=epoch,
                required_acks=1,
            )
            if per_segment and (i + 1) % per_segment == 0:
                self.log.roll()

    def remote(self, state: RemoteLogSegmentState | None = None) -> list[RemoteLogSegmentMetadata]:
        tip = TopicIdPartition(self.log.topic_id, self.tp.topic, self.tp.partition)  # type: ignore[arg-type]
        segs = sorted(self.rlmm.list_remote_log_segments(tip), key=lambda s: s.start_offset)
        return [s for s in segs if state is None or s.state is state]

    def finished(self) -> list[tuple[int, int]]:
        return [
            (s.start_offset, s.end_offset)
            for s in self.remote(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        ]

    def metric(self, name: str) -> float:
        return self.metrics.value(name, topic=self.tp.topic, partition=self.tp.partition)

    def close(self) -> None:
        self.rlm.close()
        self.log.close()


def make_stack(
    root: Path,
    *,
    log_config: LogConfig | None = None,
    rlm_overrides: dict[str, Any] | None = None,
    autorun: bool = False,
    lead: bool = True,
    topic_io: InMemoryMetadataTopicIO | None = None,
    rsm: DirectoryRemoteStorageManager | None = None,
) -> Stack:
    """A log, the directory plugin, the topic-based RLMM and an RLM under ``root``; with
    ``topic_io`` from an earlier stack on the same root, a broker restart: the log is
    reopened from disk and the metadata replayed from that topic. ``rsm``: a directory
    plugin (or subclass) to configure instead of a new one."""
    topic_io = topic_io or InMemoryMetadataTopicIO()
    cfg = log_config or LogConfig(
        index_interval_bytes=1, remote_storage_enable=True, retention_ms=-1
    )
    lg = PartitionLog(
        TopicPartition(TIP.topic, TIP.partition),
        root / "logs" / f"{TIP.topic}-{TIP.partition}",
        cfg,
        topic_id=TIP.topic_id,
        remote_enabled=True,
    )
    rsm = rsm if rsm is not None else DirectoryRemoteStorageManager()
    rsm.configure({"dir": str(root / "remote")})
    rlmm = TopicBasedRemoteLogMetadataManager(topic_io)
    rlmm.configure(
        {
            "remote.log.metadata.consume.poll.interval.ms": "5",
            "remote.log.metadata.snapshot.enable": "false",
        }
    )
    settings: dict[str, Any] = {
        "task_interval_ms": 50 if autorun else 3_600_000,
        "initial_task_delay_ms": 0 if autorun else 3_600_000,
    }
    settings.update(rlm_overrides or {})
    metrics = RemoteMetrics()
    rlm = RemoteLogManager(
        RemoteLogManagerConfig(**settings), rsm, rlmm, root / "logs", metrics=metrics
    )
    rlm.startup()
    stack = Stack(root, lg, rsm, rlmm, rlm, metrics, topic_io=topic_io)
    if lead:
        rlm.on_leadership_change([lg])
        wait_until(lambda: rlmm.is_ready(TIP), "metadata ready")
    return stack
