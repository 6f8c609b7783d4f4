"""Remote segment metadata of one user partition (Kafka ``RemoteLogMetadataCache``).

Which query sees which segment state:

==================================  ============  =============  ==============  ===============
query                               COPY_STARTED  COPY_FINISHED  DELETE_STARTED  DELETE_FINISHED
==================================  ============  =============  ==============  ===============
``remote_log_segment_metadata``     no            yes            no              no
``list_remote_log_segments(epoch)`` yes           yes            yes             no
``list_all_remote_log_segments``    yes           yes            yes             no
==================================  ============  =============  ==============  ===============

``highest_offset_for_epoch`` counts only segments that reached COPY_FINISHED and is never
lowered. Events that are invalid transitions are logged and dropped; they never raise out of
the consumer and never leave the cache half-updated. An update for an unknown segment raises
``RemoteResourceNotFoundException`` once the cache is initialized; while the metadata
partition is still being replayed it is dropped, because the segment may have been added
and fully deleted before the replay start (e.g. a snapshot) and is legitimately unknown.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    TopicIdPartition,
)
from tierlog.tiered.metadata.leader_epoch_state import RemoteLogLeaderEpochState
from tierlog.tiered.metadata.partition_snapshot import EpochSnapshot, PartitionSnapshot

log = logging.getLogger(__name__)

State = RemoteLogSegmentState


def _epoch_ranges(m: RemoteLogSegmentMetadata) -> list[tuple[int, int, int]]:
    """(epoch, first offset, last offset) of each epoch inside the segment."""
    items = list(m.segment_leader_epochs.items())
    out = []
    for i, (epoch, start) in enumerate(items):
        end = items[i + 1][1] - 1 if i + 1 < len(items) else m.end_offset
        out.append((epoch, start, end))
    return out


class RemoteLogMetadataCache:
    """Thread-safe: the consumer thread mutates, any thread queries."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._id_to_metadata: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        self._epochs: dict[int, RemoteLogLeaderEpochState] = {}
        self._initialized = threading.Event()

    # -- initialization ---------------------------------------------------------------------

    def mark_initialized(self) -> None:
        self._initialized.set()

    def is_initialized(self) -> bool:
        return self._initialized.is_set()

    def await_initialized(self, timeout_s: float | None) -> bool:
        return self._initialized.wait(timeout_s)

    # -- mutation ---------------------------------------------------------------------------

    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        if metadata is None:
            raise TypeError("metadata must not be None")
        if metadata.state is not State.COPY_SEGMENT_STARTED:
            raise ValueError(
                f"added metadata must be COPY_SEGMENT_STARTED, got {metadata.state.name}"
            )
        sid = metadata.remote_log_segment_id
        with self._lock:
            existing = self._id_to_metadata.get(sid)
            if existing is not None and not State.is_valid_transition(
                existing.state, metadata.state
            ):
                log.warning(
                    "dropping add of %s: invalid transition %s -> %s",
                    sid,
                    existing.state.name,
                    metadata.state.name,
                )
                return
            for epoch in metadata.segment_leader_epochs:
                self._epoch(epoch).handle_copy_started(sid)
            self._id_to_metadata[sid] = metadata

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        if update is None:
            raise TypeError("update must not be None")
        sid = update.remote_log_segment_id
        with self._lock:
            existing = self._id_to_metadata.get(sid)
            if existing is None:
                if self.is_initialized():
                    raise RemoteResourceNotFoundException(
                        f"no remote log segment metadata found for {sid}"
                    )
                log.debug("ignoring update of unknown segment %s during replay", sid)
                return
            if not State.is_valid_transition(existing.state, update.state):
                log.warning(
                    "dropping update of %s: invalid transition %s -> %s",
                    sid,
                    existing.state.name,
                    update.state.name,
                )
                return
            if update.state is State.COPY_SEGMENT_STARTED:
                log.warning("dropping update of %s to COPY_SEGMENT_STARTED: use add", sid)
                return
            updated = existing.create_with_updates(update)
            handler: Callable[[RemoteLogSegmentMetadata], None] = {
                State.COPY_SEGMENT_FINISHED: self._on_copy_finished,
                State.DELETE_SEGMENT_STARTED: self._on_delete_started,
                State.DELETE_SEGMENT_FINISHED: self._on_delete_finished,
            }[update.state]
            handler(updated)

    def _epoch(self, epoch: int) -> RemoteLogLeaderEpochState:
        state = self._epochs.get(epoch)
        if state is None:
            state = self._epochs[epoch] = RemoteLogLeaderEpochState()
        return state

    def _on_copy_finished(self, m: RemoteLogSegmentMetadata) -> None:
        for epoch, start, end in _epoch_ranges(m):
            self._epoch(epoch).handle_copy_finished(
                start, m.remote_log_segment_id, end, txn_index=not m.txn_idx_empty
            )
        self._id_to_metadata[m.remote_log_segment_id] = m

    def _on_delete_started(self, m: RemoteLogSegmentMetadata) -> None:
        for epoch, start, _ in _epoch_ranges(m):
            self._epoch(epoch).handle_delete_started(start, m.remote_log_segment_id)
        self._id_to_metadata[m.remote_log_segment_id] = m

    def _on_delete_finished(self, m: RemoteLogSegmentMetadata) -> None:
        for epoch in m.segment_leader_epochs:
            self._epoch(epoch).handle_delete_finished(m.remote_log_segment_id)
        del self._id_to_metadata[m.remote_log_segment_id]

    # -- queries ----------------------------------------------------------------------------

    def remote_log_segment_metadata(
        self, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            return self._lookup(epoch, offset)

    def _lookup(self, epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        state = self._epochs.get(epoch)
        if state is None:
            return None
        sid = state.floor_entry(offset)
        if sid is None:
            return None
        m = self._id_to_metadata[sid]
        return m if offset <= _epoch_end(m, epoch) else None

    def next_segment_with_txn_index(
        self, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """First readable segment of ``epoch`` whose range of that epoch ends at or after
        ``offset`` and that has a transaction index."""
        with self._lock:
            state = self._epochs.get(epoch)
            if state is None:
                return None
            for sid in state.txn_indexed_from(offset):
                m = self._id_to_metadata[sid]
                if _epoch_end(m, epoch) >= offset:
                    return m
            return None

    def highest_offset_for_epoch(self, epoch: int) -> int | None:
        with self._lock:
            state = self._epochs.get(epoch)
            return None if state is None else state.highest_log_offset

    def list_remote_log_segments(self, epoch: int) -> list[RemoteLogSegmentMetadata]:
        with self._lock:
            state = self._epochs.get(epoch)
            return [] if state is None else state.list_segments(self._id_to_metadata)

    def list_all_remote_log_segments(self) -> list[RemoteLogSegmentMetadata]:
        with self._lock:
            return list(self._id_to_metadata.values())

    def has_segment(self, segment_id: RemoteLogSegmentId) -> bool:
        """True for a segment in any state but DELETE_SEGMENT_FINISHED."""
        with self._lock:
            return segment_id in self._id_to_metadata

    def is_empty(self) -> bool:
        with self._lock:
            return not self._id_to_metadata

    # -- snapshots --------------------------------------------------------------------------

    def to_snapshot(self, tip: TopicIdPartition, covered_offset: int) -> PartitionSnapshot:
        with self._lock:
            segments = sorted(
                self._id_to_metadata.values(),
                key=lambda m: (m.start_offset, m.remote_log_segment_id.id.bytes),
            )
            epochs = []
            for epoch in sorted(self._epochs):
                st = self._epochs[epoch]
                ref, unref = st.segment_uuids()
                epochs.append(EpochSnapshot(epoch, st.highest_log_offset, tuple(ref), tuple(unref)))
            return PartitionSnapshot(tip, covered_offset, None, tuple(segments), tuple(epochs))

    def restore(self, snap: PartitionSnapshot) -> None:
        """Replace the contents with a snapshot's; does not change initialization."""
        tip = snap.topic_id_partition
        with self._lock:
            self._id_to_metadata = {m.remote_log_segment_id: m for m in snap.segments}
            self._epochs = {}
            for e in snap.epochs:
                st = RemoteLogLeaderEpochState()
                st.restore(
                    e.highest_log_offset,
                    ((start, RemoteLogSegmentId(tip, u)) for start, u in e.referenced),
                    (RemoteLogSegmentId(tip, u) for u in e.unreferenced),
                    lambda sid: (
                        sid in self._id_to_metadata and not self._id_to_metadata[sid].txn_idx_empty
                    ),
                )
                self._epochs[e.epoch] = st


def _epoch_end(m: RemoteLogSegmentMetadata, epoch: int) -> int:
    """Last offset of ``epoch`` inside segment ``m``."""
    found = False
    for e, start in m.segment_leader_epochs.items():
        if found:
            return start - 1
        found = e == epoch
    return m.end_offset
