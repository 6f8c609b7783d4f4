"""Every transition of both lifecycle state machines, against Kafka's table."""

from __future__ import annotations

import itertools

import pytest

from tierlog.tiered.api import RemoteLogSegmentState, RemotePartitionDeleteState

S = RemoteLogSegmentState
P = RemotePartitionDeleteState

SEGMENT_VALID = {
    (None, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED),
    (S.DELETE_SEGMENT_FINISHED, S.DELETE_SEGMENT_FINISHED),
}

PARTITION_VALID = {
    (None, P.DELETE_PARTITION_MARKED),
    (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_MARKED),
    (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED),
    (P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_STARTED),
    (P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_FINISHED),
    (P.DELETE_PARTITION_FINISHED, P.DELETE_PARTITION_FINISHED),
}


@pytest.mark.parametrize(("src", "dst"), list(itertools.product([None, *S], list(S))), ids=str)
def test_segment_transition_matches_kafka_table(
    src: RemoteLogSegmentState | None, dst: RemoteLogSegmentState
) -> None:
    assert S.is_valid_transition(src, dst) is ((src, dst) in SEGMENT_VALID)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product([None, *P], list(P))), ids=str)
def test_partition_delete_transition_matches_kafka_table(
    src: RemotePartitionDeleteState | None, dst: RemotePartitionDeleteState
) -> None:
    assert P.is_valid_transition(src, dst) is ((src, dst) in PARTITION_VALID)


def test_wire_ids_are_kafkas() -> None:
    assert [s.id for s in S] == [0, 1, 2, 3]
    assert [s.name for s in S] == [
        "COPY_SEGMENT_STARTED",
        "COPY_SEGMENT_FINISHED",
        "DELETE_SEGMENT_STARTED",
        "DELETE_SEGMENT_FINISHED",
    ]
    assert [p.id for p in P] == [0, 1, 2]
    assert S.for_id(2) is S.DELETE_SEGMENT_STARTED
    assert P.for_id(1) is P.DELETE_PARTITION_STARTED


def test_unknown_wire_id_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown remote log segment state id 9"):
        S.for_id(9)
    with pytest.raises(ValueError, match="unknown remote partition delete state id 3"):
        P.for_id(3)
