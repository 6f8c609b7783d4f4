"""Spec §5.5 example 56: ``RemoteLogLeaderEpochState``."""

from __future__ import annotations

import pytest

from tests.tiered.metadata.metadata_factories import TIP, segment
from tierlog.tiered.api import RemoteLogSegmentId, RemoteResourceNotFoundException
from tierlog.tiered.metadata.leader_epoch_state import RemoteLogLeaderEpochState


def sid() -> RemoteLogSegmentId:
    return RemoteLogSegmentId.generate_new(TIP)


def referenced(st: RemoteLogLeaderEpochState) -> set[RemoteLogSegmentId]:
    return set(st.offset_to_id.values())


def test_overlap_by_later_leader_unreferences_earlier() -> None:
    st, s1, s2 = RemoteLogLeaderEpochState(), sid(), sid()
    st.handle_copy_finished(10, s1, 100)
    st.handle_copy_finished(5, s2, 150)
    assert referenced(st) == {s2}
    assert st.unreferenced == {s1}
    assert st.highest_log_offset == 150


def test_multiple_overlaps_leave_only_the_widest() -> None:
    st = RemoteLogLeaderEpochState()
    s = [sid() for _ in range(4)]
    for (start, end), x in zip([(10, 100), (5, 150), (148, 155), (4, 200)], s, strict=True):
        st.handle_copy_finished(start, x, end)
    assert referenced(st) == {s[3]}
    assert st.unreferenced == set(s[:3])
    assert st.highest_log_offset == 200


def test_duplicate_upload_latest_wins() -> None:
    st, s1, s2 = RemoteLogLeaderEpochState(), sid(), sid()
    st.handle_copy_finished(10, s1, 100)
    st.handle_copy_finished(10, s2, 100)
    assert referenced(st) == {s2}
    assert st.unreferenced == {s1}


def test_same_start_longer_end_wins() -> None:
    st, s1, s2 = RemoteLogLeaderEpochState(), sid(), sid()
    st.handle_copy_finished(10, s1, 100)
    st.handle_copy_finished(10, s2, 150)
    assert referenced(st) == {s2}
    assert st.unreferenced == {s1}
    assert st.highest_log_offset == 150


def test_non_overlapping_successor_keeps_both() -> None:
    st, s1, s2 = RemoteLogLeaderEpochState(), sid(), sid()
    st.handle_copy_finished(0, s1, 99)
    st.handle_copy_finished(100, s2, 199)
    assert referenced(st) == {s1, s2}
    assert st.floor_entry(150) == s2
    assert st.floor_entry(99) == s1


def test_delete_started_unmaps_and_delete_finished_forgets() -> None:
    st, s1 = RemoteLogLeaderEpochState(), sid()
    st.handle_copy_finished(10, s1, 100)
    st.handle_delete_started(10, s1)
    assert referenced(st) == set()
    assert st.unreferenced == {s1}
    assert st.floor_entry(50) is None
    st.handle_delete_finished(s1)
    assert st.is_empty()
    assert st.highest_log_offset == 100


def test_listing_sorts_referenced_and_unreferenced_by_start() -> None:
    st = RemoteLogLeaderEpochState()
    a, b, c = segment(0, 99), segment(100, 199), segment(200, 299)
    st.handle_copy_finished(100, b.remote_log_segment_id, 199)
    st.handle_copy_started(c.remote_log_segment_id)
    st.handle_copy_finished(0, a.remote_log_segment_id, 99)
    st.handle_delete_started(0, a.remote_log_segment_id)
    by_id = {m.remote_log_segment_id: m for m in (a, b, c)}
    assert st.list_segments(by_id) == [a, b, c]


def test_listing_an_id_without_metadata_raises() -> None:
    st = RemoteLogLeaderEpochState()
    st.handle_copy_started(sid())
    with pytest.raises(RemoteResourceNotFoundException):
        st.list_segments({})


def test_txn_indexed_from_yields_only_referenced_segments_with_a_transaction_index() -> None:
    """A read_committed Fetch asks for the next segment with a transaction index; the state
    keeps those apart, so the answer does not walk every later segment."""
    st = RemoteLogLeaderEpochState()
    plain = [sid() for _ in range(50)]
    for i, s in enumerate(plain):
        st.handle_copy_finished(i * 10, s, i * 10 + 9)
    assert list(st.txn_indexed_from(0)) == []
    with_txn, superseded, deleted = sid(), sid(), sid()
    st.handle_copy_finished(500, with_txn, 509, txn_index=True)
    st.handle_copy_finished(510, superseded, 519, txn_index=True)
    st.handle_copy_finished(520, deleted, 529, txn_index=True)
    st.handle_delete_started(520, deleted)
    wider = sid()
    st.handle_copy_finished(510, wider, 519)  # a later leader's re-upload, no txn index
    assert list(st.txn_indexed_from(0)) == [with_txn]
    assert list(st.txn_indexed_from(505)) == [with_txn]  # the floor: it may still reach
    restored = RemoteLogLeaderEpochState()
    restored.restore(
        st.highest_log_offset,
        st.offset_to_id.items(),
        st.unreferenced,
        lambda s: s in (with_txn, superseded),
    )
    assert list(restored.txn_indexed_from(0)) == [with_txn]
