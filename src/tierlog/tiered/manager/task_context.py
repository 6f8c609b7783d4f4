"""What a partition's tiering tasks share with the manager that schedules them.

The copy, expiration and follower tasks run on the manager's pools (``scheduling``) and
reach the plugins, the metrics, the remote index cache and the clock through one
``TaskContext``. The manager builds it and keeps ownership of everything in it: it closes
the plugins and the cache, a task never does.

``SegmentsBeingCopied`` is the one piece of state that tasks of different kinds share. A
copy task holds a segment id in it from before COPY_SEGMENT_STARTED until after
COPY_SEGMENT_FINISHED, so an expiration task that finds an id outside it, and then still
sees COPY_SEGMENT_STARTED, knows that no copy on this broker will ever finish it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from tierlog.tiered.api import (
    CustomMetadata,
    RemoteLogMetadataManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteStorageManager,
    TopicIdPartition,
)
from tierlog.tiered.manager.config import RemoteLogManagerConfig
from tierlog.tiered.manager.index_cache import RemoteIndexCache
from tierlog.tiered.manager.metrics import RemoteMetrics

__all__ = ["SegmentsBeingCopied", "TaskContext", "metric_labels"]


def metric_labels(tip: TopicIdPartition) -> tuple[str, str]:
    """The ``topic`` and ``partition`` labels of a partition's tiering metrics."""
    return tip.topic, str(tip.partition)


class SegmentsBeingCopied:
    """Ids of the segments this broker's copy tasks are uploading; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[RemoteLogSegmentId] = set()

    @contextmanager
    def holding(self, sid: RemoteLogSegmentId) -> Iterator[None]:
        with self._lock:
            self._ids.add(sid)
        try:
            yield
        finally:
            with self._lock:
                self._ids.discard(sid)

    def __contains__(self, sid: object) -> bool:
        with self._lock:
            return sid in self._ids

    def snapshot(self) -> frozenset[RemoteLogSegmentId]:
        with self._lock:
            return frozenset(self._ids)


@dataclass(frozen=True)
class TaskContext:
    config: RemoteLogManagerConfig
    rsm: RemoteStorageManager
    rlmm: RemoteLogMetadataManager
    metrics: RemoteMetrics
    index_cache: RemoteIndexCache
    clock_ms: Callable[[], int]
    being_copied: SegmentsBeingCopied = field(default_factory=SegmentsBeingCopied)

    def segment_update(
        self,
        md: RemoteLogSegmentMetadata,
        state: RemoteLogSegmentState,
        custom: CustomMetadata | None = None,
    ) -> RemoteLogSegmentMetadataUpdate:
        """The event moving ``md`` to ``state``, from this broker, now; the custom
        metadata stays ``md``'s unless ``custom`` replaces it."""
        return RemoteLogSegmentMetadataUpdate(
            md.remote_log_segment_id,
            self.clock_ms(),
            custom if custom is not None else md.custom_metadata,
            state,
            self.config.broker_id,
        )

    def publish_state(self, md: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> None:
        """Publish one segment's new state and wait until it is applied."""
        self.rlmm.update_remote_log_segment_metadata(self.segment_update(md, state)).result()

    def publish_all(
        self, segments: Sequence[RemoteLogSegmentMetadata], state: RemoteLogSegmentState
    ) -> None:
        """Publish one state for many segments, then wait for all (one batch, as Kafka)."""
        futures = [
            self.rlmm.update_remote_log_segment_metadata(self.segment_update(s, state))
            for s in segments
        ]
        for f in futures:
            f.result()
