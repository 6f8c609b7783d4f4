"""Per-leader-epoch view of a partition's remote segments (Kafka ``RemoteLogLeaderEpochState``).

Rules:

* ``offset_to_id`` maps the start offset *of this epoch inside a segment* to the segment, and
  only holds ``COPY_SEGMENT_FINISHED`` segments: it is what reads resolve against.
* ``unreferenced`` holds segments of this epoch that must still be listed (so they can be
  cleaned up) but must not be read: copies in progress, segments being deleted, and
  segments superseded by an overlapping upload from a later leader.
* ``highest_log_offset`` is the highest end offset of this epoch ever finished. It is never
  lowered, not even when the segment holding it is deleted.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping

from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
)


class RemoteLogLeaderEpochState:
    """Not thread-safe; the owning cache serialises access."""

    __slots__ = ("_keys", "_txn_keys", "highest_log_offset", "offset_to_id", "unreferenced")

    def __init__(self) -> None:
        self.offset_to_id: dict[int, RemoteLogSegmentId] = {}
        self._keys: list[int] = []  # sorted keys of offset_to_id, for floor lookups
        # the keys whose segment has a transaction index, sorted: a read_committed Fetch
        # looks for the next such segment, and with none ahead a scan of every later
        # segment would cost each Fetch time in proportion to the remote history
        self._txn_keys: list[int] = []
        self.unreferenced: set[RemoteLogSegmentId] = set()
        self.highest_log_offset: int | None = None

    def handle_copy_started(self, segment_id: RemoteLogSegmentId) -> None:
        self.unreferenced.add(segment_id)

    def handle_copy_finished(
        self,
        start_offset: int,
        segment_id: RemoteLogSegmentId,
        epoch_end_offset: int,
        txn_index: bool = False,
    ) -> None:
        """Map the segment for reads, superseding what a successive leader re-uploaded.

        Entries at or after ``start_offset`` are dropped while this segment reaches at least
        as far as everything seen so far: a later leader re-uploading a superset of an
        earlier, lagging leader's segments (duplicate or overlapping ranges).
        """
        highest = self.highest_log_offset
        while (
            self._keys
            and self._keys[-1] >= start_offset
            and (highest is None or highest <= epoch_end_offset)
        ):
            last = self._keys.pop()
            self._forget_txn_key(last)
            self.unreferenced.add(self.offset_to_id.pop(last))
        old = self.offset_to_id.get(start_offset)
        if old is None:
            bisect.insort(self._keys, start_offset)
        self._forget_txn_key(start_offset)
        if txn_index:
            bisect.insort(self._txn_keys, start_offset)
        self.offset_to_id[start_offset] = segment_id
        self.unreferenced.discard(segment_id)
        if old is not None and old != segment_id:
            self.unreferenced.add(old)
        if highest is None or epoch_end_offset > highest:
            self.highest_log_offset = epoch_end_offset

    def handle_delete_started(self, start_offset: int, segment_id: RemoteLogSegmentId) -> None:
        if self.offset_to_id.get(start_offset) == segment_id:
            del self.offset_to_id[start_offset]
            self._keys.pop(bisect.bisect_left(self._keys, start_offset))
            self._forget_txn_key(start_offset)
        self.unreferenced.add(segment_id)

    def _forget_txn_key(self, start_offset: int) -> None:
        i = bisect.bisect_left(self._txn_keys, start_offset)
        if i < len(self._txn_keys) and self._txn_keys[i] == start_offset:
            self._txn_keys.pop(i)

    def handle_delete_finished(self, segment_id: RemoteLogSegmentId) -> None:
        self.unreferenced.discard(segment_id)

    def floor_entry(self, offset: int) -> RemoteLogSegmentId | None:
        i = bisect.bisect_right(self._keys, offset)
        return self.offset_to_id[self._keys[i - 1]] if i else None

    def txn_indexed_from(self, offset: int) -> Iterator[RemoteLogSegmentId]:
        """Referenced segments with a transaction index, from the last one starting at or
        before ``offset`` onwards, in offset order (lazily: callers stop at the first that
        reaches ``offset``)."""
        i = max(bisect.bisect_right(self._txn_keys, offset) - 1, 0)
        for k in self._txn_keys[i:]:
            yield self.offset_to_id[k]

    def list_segments(
        self, id_to_metadata: Mapping[RemoteLogSegmentId, RemoteLogSegmentMetadata]
    ) -> list[RemoteLogSegmentMetadata]:
        """Referenced and unreferenced segments of this epoch sorted by start offset."""
        out: list[RemoteLogSegmentMetadata] = []
        for sid in (*self.offset_to_id.values(), *self.unreferenced):
            m = id_to_metadata.get(sid)
            if m is None:
                raise RemoteResourceNotFoundException(f"no metadata found for segment {sid}")
            out.append(m)
        out.sort(key=lambda m: m.start_offset)
        return out

    def is_empty(self) -> bool:
        return not self.offset_to_id and not self.unreferenced

    def restore(
        self,
        highest_log_offset: int | None,
        offset_to_id: Iterable[tuple[int, RemoteLogSegmentId]],
        unreferenced: Iterable[RemoteLogSegmentId],
        txn_indexed: Callable[[RemoteLogSegmentId], bool] = lambda _sid: False,
    ) -> None:
        """Load the exact state captured by a snapshot (it depends on event history, so it
        cannot be recomputed from the surviving segments alone); ``txn_indexed`` tells
        which segments have a transaction index (their metadata says so)."""
        self.highest_log_offset = highest_log_offset
        self.offset_to_id = dict(offset_to_id)
        self._keys = sorted(self.offset_to_id)
        self._txn_keys = [k for k in self._keys if txn_indexed(self.offset_to_id[k])]
        self.unreferenced = set(unreferenced)

    def segment_uuids(self) -> tuple[list[tuple[int, uuid.UUID]], list[uuid.UUID]]:
        """(referenced as (start, id), unreferenced ids), deterministic order, for snapshots."""
        ref = [(k, self.offset_to_id[k].id) for k in self._keys]
        unref = sorted((s.id for s in self.unreferenced), key=lambda u: u.bytes)
        return ref, unref
