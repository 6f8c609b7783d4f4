"""Lifecycle of deleting a whole partition from the remote tier.

Rules (Kafka ``RemotePartitionDeleteState.isValidTransition``): the first state must be
``DELETE_PARTITION_MARKED``; self-transitions are valid; then strictly
``MARKED -> STARTED -> FINISHED``. The values are the 1-byte wire ids; never renumber.
"""

from __future__ import annotations

import enum


class RemotePartitionDeleteState(enum.Enum):
    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @property
    def id(self) -> int:
        return int(self.value)

    @classmethod
    def for_id(cls, state_id: int) -> RemotePartitionDeleteState:
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown remote partition delete state id {state_id}") from None

    @staticmethod
    def is_valid_transition(
        src: RemotePartitionDeleteState | None, dst: RemotePartitionDeleteState
    ) -> bool:
        if src is None:
            return dst is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        if src is dst:
            return True
        if src is RemotePartitionDeleteState.DELETE_PARTITION_MARKED:
            return dst is RemotePartitionDeleteState.DELETE_PARTITION_STARTED
        if src is RemotePartitionDeleteState.DELETE_PARTITION_STARTED:
            return dst is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
        return False
