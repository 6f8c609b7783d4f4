"""The controller's leader election strategies, as pure functions (spec/kafka-replication.md
§6.5, Z-7, Z-8; Kafka's ``Election``).

Each takes a partition's current state and the replica assignment ``A`` (in order, first =
preferred) and returns the next state, or None when no replica qualifies (the partition
stays offline: clients see LEADER_NOT_AVAILABLE). Every controller-written state bumps the
leader epoch and carries the controller's epoch (Z-8); writing it, conditional on the state
znode's version and behind the controller-epoch check, is the caller's job.

* New partition: the first live replica of ``A`` leads, the ISR is every live replica.
* Offline: the first live replica of ``A`` that is in the ISR; if none and unclean election
  is allowed, the first live replica of ``A``, alone in the ISR and RECOVERING (KIP-704).
  A clean leader keeps the live part of the old ISR.
* Reassignment: the first live target replica in the ISR; the ISR is unchanged.
* Preferred: ``A[0]`` only, if live and in the ISR; the ISR is unchanged.
* Controlled shutdown: the first replica of ``A`` in the ISR that is live and not shutting
  down; shutting-down brokers leave the ISR.
* Replica offline (not an election): a failed broker leaves the ISR and the leadership,
  except that the last ISR member stays (the partition waits for it, or for an unclean
  election), checklist 17.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from tierlog.cluster.znodes import (
    LEADER_RECOVERY_RECOVERED,
    LEADER_RECOVERY_RECOVERING,
    NO_LEADER,
    PartitionState,
)


def _next(
    state: PartitionState,
    leader: int,
    isr: Sequence[int],
    controller_epoch: int,
    recovery: int = LEADER_RECOVERY_RECOVERED,
) -> PartitionState:
    return PartitionState(
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=tuple(isr),
        controller_epoch=controller_epoch,
        leader_recovery_state=recovery,
    )


def elect_new_partition(
    assignment: Sequence[int], live: Collection[int], controller_epoch: int
) -> PartitionState | None:
    """The first state of a new partition (leader epoch 0)."""
    live_replicas = [r for r in assignment if r in live]
    if not live_replicas:
        return None
    return PartitionState(live_replicas[0], 0, tuple(live_replicas), controller_epoch)


def elect_offline(
    state: PartitionState,
    assignment: Sequence[int],
    live: Collection[int],
    unclean_allowed: bool,
    controller_epoch: int,
) -> PartitionState | None:
    clean = next((r for r in assignment if r in live and r in state.isr), None)
    if clean is not None:
        return _next(state, clean, [r for r in state.isr if r in live], controller_epoch)
    if not unclean_allowed:
        return None
    unclean = next((r for r in assignment if r in live), None)
    if unclean is None:
        return None
    return _next(state, unclean, [unclean], controller_epoch, LEADER_RECOVERY_RECOVERING)


def elect_for_reassignment(
    state: PartitionState,
    target: Sequence[int],
    live: Collection[int],
    controller_epoch: int,
) -> PartitionState | None:
    leader = next((r for r in target if r in live and r in state.isr), None)
    return None if leader is None else _next(state, leader, state.isr, controller_epoch)


def elect_preferred(
    state: PartitionState,
    assignment: Sequence[int],
    live: Collection[int],
    controller_epoch: int,
) -> PartitionState | None:
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred not in live or preferred not in state.isr:
        return None
    return _next(state, preferred, state.isr, controller_epoch)


def elect_for_controlled_shutdown(
    state: PartitionState,
    assignment: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
    controller_epoch: int,
) -> PartitionState | None:
    leader = next(
        (r for r in assignment if r in state.isr and r in live and r not in shutting_down),
        None,
    )
    if leader is None:
        return None
    isr = [r for r in state.isr if r not in shutting_down]
    return _next(state, leader, isr, controller_epoch)


def remove_replica(
    state: PartitionState, replica: int, controller_epoch: int
) -> PartitionState | None:
    """The state once ``replica``'s broker is offline; None when nothing changes."""
    if replica not in state.isr and state.leader != replica:
        return None
    leader = NO_LEADER if state.leader == replica else state.leader
    isr = [r for r in state.isr if r != replica] or [replica]
    return _next(state, leader, isr, controller_epoch, state.leader_recovery_state)
