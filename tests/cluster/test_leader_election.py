"""Leader election strategies of Kafka's controller (spec §6.5; checklist 16, 17, 39-41)."""

from __future__ import annotations

from tierlog.cluster.leader_election import (
    elect_for_controlled_shutdown,
    elect_for_reassignment,
    elect_new_partition,
    elect_offline,
    elect_preferred,
    remove_replica,
)
from tierlog.cluster.znodes import LEADER_RECOVERY_RECOVERING, NO_LEADER, PartitionState

A = (1, 2, 3)


def state(leader: int, isr: tuple[int, ...], epoch: int = 4) -> PartitionState:
    return PartitionState(leader, epoch, isr, controller_epoch=1)


def test_new_partition() -> None:
    assert elect_new_partition(A, {2, 3}, 7) == PartitionState(2, 0, (2, 3), 7)
    assert elect_new_partition(A, {9}, 7) is None


def test_offline_prefers_the_isr_in_assignment_order() -> None:
    s = state(NO_LEADER, (3, 2))
    assert elect_offline(s, A, {2, 3}, False, 2) == PartitionState(2, 5, (3, 2), 2)
    only3 = elect_offline(state(1, (1, 2, 3)), A, {3}, False, 2)
    assert only3 == PartitionState(3, 5, (3,), 2), "old ISR intersected with live brokers"


def test_offline_unclean_only_when_allowed() -> None:
    s = state(NO_LEADER, (1,))
    assert elect_offline(s, A, {2, 3}, False, 2) is None
    assert elect_offline(s, A, {2, 3}, True, 2) == PartitionState(
        2, 5, (2,), 2, leader_recovery_state=LEADER_RECOVERY_RECOVERING
    )
    assert elect_offline(s, A, set(), True, 2) is None


def test_reassignment_picks_a_live_target_in_the_isr() -> None:
    s = state(1, (1, 2, 3, 4, 5, 6))
    assert elect_for_reassignment(s, (4, 5, 6), {1, 2, 3, 5, 6}, 2) == PartitionState(
        5, 5, (1, 2, 3, 4, 5, 6), 2
    )
    assert elect_for_reassignment(state(1, (1, 2, 3)), (4, 5, 6), {4, 5, 6}, 2) is None


def test_preferred_is_only_ever_the_first_replica() -> None:
    assert elect_preferred(state(2, (1, 2)), A, {1, 2}, 2) == PartitionState(1, 5, (1, 2), 2)
    assert elect_preferred(state(2, (2, 3)), A, {1, 2, 3}, 2) is None, "preferred not in ISR"
    assert elect_preferred(state(2, (1, 2)), A, {2, 3}, 2) is None, "preferred not live"


def test_controlled_shutdown_moves_leadership_and_shrinks_the_isr() -> None:
    s = state(1, (1, 2, 3))
    assert elect_for_controlled_shutdown(s, A, {1, 2, 3}, {1}, 2) == PartitionState(2, 5, (2, 3), 2)
    assert elect_for_controlled_shutdown(state(1, (1,)), A, {1, 2, 3}, {1}, 2) is None


def test_removing_an_offline_replica_bumps_the_epoch_but_keeps_the_last_isr_member() -> None:
    assert remove_replica(state(1, (1, 2)), 2, 2) == PartitionState(1, 5, (1,), 2)
    assert remove_replica(state(1, (1, 2)), 1, 2) == PartitionState(NO_LEADER, 5, (2,), 2)
    assert remove_replica(state(1, (1,)), 1, 2) == PartitionState(NO_LEADER, 5, (1,), 2)
    assert remove_replica(state(1, (1, 2)), 3, 2) is None
