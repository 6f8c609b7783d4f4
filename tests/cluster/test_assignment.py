"""Replica assignment as Kafka's AdminUtils.assignReplicasToBrokers behaves (Z-14, Z-15),
with the examples of its documentation and its properties over random inputs."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.cluster.assignment import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    RackInformationError,
    assign_replicas,
    rack_alternated,
)


def test_rack_unaware_documented_example() -> None:
    """AdminUtils' example: 5 brokers, 10 partitions, RF 3, start index 0."""
    brokers = {b: None for b in range(5)}
    assert assign_replicas(brokers, 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_rack_alternated_list_documented_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_documented_example() -> None:
    """AdminUtils' example: six partitions go round the rack-alternated list; the seventh
    starts shifting the followers (0,4,2 rather than 0,3,1 again)."""
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas(racks, 7, 3, fixed_start_index=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_added_partitions_continue_the_leader_round_robin() -> None:
    """Partitions numbered from ``start_partition_id`` take the leaders the next partitions
    of the same walk would have (followers start from the given shift, as in Kafka)."""
    brokers = {b: None for b in range(5)}
    whole = assign_replicas(brokers, 10, 3, fixed_start_index=0)
    added = assign_replicas(brokers, 4, 3, fixed_start_index=0, start_partition_id=6)
    assert sorted(added) == [6, 7, 8, 9]
    assert [added[p][0] for p in added] == [whole[p][0] for p in range(6, 10)]


def test_invalid_requests() -> None:
    brokers = {1: None, 2: None}
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 1, 3)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 1, 0)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(brokers, 0, 1)
    with pytest.raises(RackInformationError):
        assign_replicas({1: "a", 2: None}, 1, 1)


def test_single_broker() -> None:
    assert assign_replicas({7: None}, 3, 1) == {0: [7], 1: [7], 2: [7]}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[int, str | None], int, int, int]:
    ids = draw(st.sets(st.integers(0, 50), min_size=1, max_size=12))
    with_racks = draw(st.booleans())
    num_racks = draw(st.integers(1, 4))
    brokers: dict[int, str | None] = {
        b: (f"r{draw(st.integers(0, num_racks - 1))}" if with_racks else None) for b in ids
    }
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2**32))
    return brokers, partitions, rf, seed


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_properties(case: tuple[dict[int, str | None], int, int, int]) -> None:
    brokers, partitions, rf, seed = case
    assignment = assign_replicas(brokers, partitions, rf, rng=random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    racks = {r for r in brokers.values() if r is not None}
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf, "two replicas of a partition on one broker"
        assert set(replicas) <= set(brokers)
        if racks:
            assert len({brokers[b] for b in replicas}) == min(rf, len(racks)), "racks not spread"
    leaders = Counter(replicas[0] for replicas in assignment.values())
    fair = partitions // len(brokers)
    assert all(fair <= leaders[b] <= fair + 1 for b in brokers), "leaders unbalanced"


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 9), st.integers(1, 40), st.integers(0, 8))
def test_replicas_balanced_without_racks(n: int, partitions: int, start: int) -> None:
    """Over whole rounds each broker holds the same number of replicas."""
    brokers = {b: None for b in range(n)}
    rf = min(3, n)
    assignment = assign_replicas(brokers, n * partitions, rf, fixed_start_index=start % n)
    held = Counter(b for replicas in assignment.values() for b in replicas)
    assert set(held.values()) == {partitions * rf}
