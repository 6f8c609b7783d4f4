"""Lifecycle of a remote segment: the whole state machine lives here.

Rules (Kafka ``RemoteLogSegmentState.isValidTransition``):

* a segment is born ``COPY_SEGMENT_STARTED`` (``None -> COPY_SEGMENT_STARTED`` only);
* a self-transition is always valid, so retried events after failover are harmless;
* ``COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED | DELETE_SEGMENT_STARTED`` (the latter
  cleans up a failed or abandoned copy);
* ``COPY_SEGMENT_FINISHED -> DELETE_SEGMENT_STARTED``;
* ``DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED``;
* everything else is invalid.

The numeric values are the 1-byte ids written to ``__remote_log_metadata``; never renumber.
"""

from __future__ import annotations

import enum


class RemoteLogSegmentState(enum.Enum):
    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @property
    def id(self) -> int:
        return int(self.value)

    @classmethod
    def for_id(cls, state_id: int) -> RemoteLogSegmentState:
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown remote log segment state id {state_id}") from None

    @staticmethod
    def is_valid_transition(src: RemoteLogSegmentState | None, dst: RemoteLogSegmentState) -> bool:
        if src is None:
            return dst is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        if src is dst:
            return True
        return dst in _NEXT[src]


_NEXT: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}
