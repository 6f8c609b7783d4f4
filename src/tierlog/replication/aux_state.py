"""A follower's bootstrap from the remote tier (KIP-405, Kafka's ``TierStateMachine``;
spec/kafka-tiered-storage.md §7.2).

A follower whose fetch offset the leader holds only in remote storage is answered
OFFSET_MOVED_TO_TIERED_STORAGE. It then builds its auxiliary state instead of copying the
tiered history:

1. the leader's earliest local offset ``L`` and its epoch ``E`` (ListOffsets -4);
2. the epoch of ``L - 1``: ``E``, unless OffsetForLeaderEpoch(``E - 1``) says the previous
   epoch ends after ``L - 1`` (an epoch may have no records);
3. the COPY_SEGMENT_FINISHED segment holding ``(epoch, L - 1)`` in the local RLMM, its
   leader-epoch checkpoint and producer snapshot through the RSM (``RemoteAuxStateSource``,
   given by the server, because replication does not import tiered storage);
4. the local log truncated fully and restarted at that segment's end + 1, with the leader's
   log start, the epoch cache and the producer state rebuilt from those two files.

The follower then fetches from there. A missing segment (the local metadata is not there
yet) is an error for this round: the partition backs off and tries again.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tierlog.log import PartitionLog

__all__ = ["AuxStateUnavailable", "RemoteAuxState", "RemoteAuxStateSource", "build_aux_state"]


class AuxStateUnavailable(RuntimeError):
    """The remote tier cannot give the state this round (metadata not loaded, no segment,
    a failed read): retried after the fetch back-off."""


@dataclass(frozen=True)
class RemoteAuxState:
    """What one remote segment says of the log just past its end."""

    next_offset: int
    """The segment's end offset + 1: where the follower's local log starts."""
    epochs: list[tuple[int, int]]
    """The segment's leader-epoch checkpoint: (epoch, start offset), ascending."""
    producer_snapshot: bytes
    """The producer-state snapshot at ``next_offset``, in the log's snapshot format."""


class RemoteAuxStateSource(abc.ABC):
    """The remote tier as a bootstrapping follower sees it (implemented over the
    RemoteLogManager by the server). Calls block: run them off the event loop."""

    @abc.abstractmethod
    def aux_state(self, log: PartitionLog, epoch: int, offset: int) -> RemoteAuxState:
        """The state at the end of the remote segment holding ``(epoch, offset)``; raises
        ``AuxStateUnavailable`` when there is none now."""


#: The leader's earliest local offset and its epoch (ListOffsets -4); None after an error.
EarliestLocal = Callable[[], Awaitable[tuple[int, int] | None]]
#: The leader's (epoch, end offset) for an epoch (OffsetForLeaderEpoch); None after an error.
EpochEnd = Callable[[int], Awaitable[tuple[int, int] | None]]


async def build_aux_state(
    plog: PartitionLog,
    source: RemoteAuxStateSource,
    leader_log_start: int,
    earliest_local: EarliestLocal,
    epoch_end: EpochEnd,
) -> int | None:
    """Steps 1-4 of the module docstring; returns the offset fetching resumes at, or None
    when a leader request failed (the caller has already backed the partition off)."""
    first = await earliest_local()
    if first is None:
        return None
    local_start, epoch = first
    target = local_start - 1
    if target < 0:
        raise AuxStateUnavailable("the leader's local log starts at 0: nothing is remote")
    target_epoch = epoch
    if epoch > 0:
        previous = await epoch_end(epoch - 1)
        if previous is None:
            return None
        prev_epoch, prev_end = previous
        if prev_epoch >= 0 and prev_end > target:
            target_epoch = prev_epoch
    state = await asyncio.to_thread(source.aux_state, plog, target_epoch, target)
    await asyncio.to_thread(
        plog.restart_from_remote,
        state.next_offset,
        min(leader_log_start, state.next_offset),
        state.epochs,
        state.producer_snapshot,
    )
    return state.next_offset
