"""Spec §5.2: what the expiration task deletes and where the log start offset moves."""

from __future__ import annotations

from tests.tiered.manager.rlm_helpers import by_epoch, seg
from tierlog.tiered.api import RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentState
from tierlog.tiered.manager.expiration import ExpirationPlan, plan_expiration
from tierlog.tiered.manager.lineage import epoch_entries_in_range

S = RemoteLogSegmentState


def plan(
    segments: list[RemoteLogSegmentMetadata],
    *,
    epochs: list[tuple[int, int]] | None = None,
    leo: int = 200,
    log_start: int = 0,
    local: int = 0,
    retention_ms: int = -1,
    retention_bytes: int = -1,
    now: int = 1_000_000,
    being_copied: frozenset[RemoteLogSegmentId] = frozenset(),
) -> ExpirationPlan:
    listed, for_epoch = by_epoch(segments)
    return plan_expiration(
        all_segments=listed,
        segments_for_epoch=for_epoch,
        leader_epochs=epochs or [(0, 0)],
        log_start_offset=log_start,
        log_end_offset=leo,
        only_local_size_bytes=local,
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
        now_ms=now,
        being_copied=being_copied,
    )


def test_breach_by_size_deletes_both_and_moves_start_to_200() -> None:
    a, b = seg(0, 99), seg(100, 199)
    p = plan([a, b], retention_bytes=0)
    assert p.to_delete == [a, b]
    assert p.new_log_start_offset == 200


def test_breach_by_time_deletes_both_and_moves_start_to_200() -> None:
    a, b = seg(0, 99, max_ts=10), seg(100, 199, max_ts=20)
    p = plan([a, b], retention_ms=0, now=100)
    assert p.to_delete == [a, b]
    assert p.new_log_start_offset == 200


def test_overlapping_segments_both_deleted_start_is_max_end_plus_one() -> None:
    s1, s2 = seg(0, 99), seg(0, 104)
    ordered = [s2, s1]  # valid first, then the unreferenced one

    p = plan_expiration(
        all_segments=ordered,
        segments_for_epoch=lambda e: iter(ordered),
        leader_epochs=[(0, 0)],
        log_start_offset=0,
        log_end_offset=200,
        only_local_size_bytes=0,
        retention_ms=-1,
        retention_bytes=0,
        now_ms=0,
    )
    assert p.to_delete == [s2, s1]
    assert p.new_log_start_offset == 105


def test_exact_size_budget_deletes_exactly_k_oldest() -> None:
    epochs = [(0, 0), (1, 20), (3, 50), (4, 100)]
    for k in (0, 1, 23, 50):
        segments = []
        for i in range(50):
            start, end = i * 100, i * 100 + 99
            eps = dict(epoch_entries_in_range(epochs, start, end + 1))
            segments.append(seg(start, end, eps, size=1024))
        p = plan(
            segments,
            epochs=epochs,
            leo=5000,
            local=512,
            retention_bytes=(50 - k) * 1024 + 512,
        )
        assert p.to_delete == segments[:k], k
        assert p.new_log_start_offset == (k * 100 if k else None)


def test_exact_time_budget_is_inclusive() -> None:
    now = 10_000
    k = 3
    segments = [seg(i * 10, i * 10 + 9, max_ts=now - 1 if i < k else now) for i in range(6)]
    p = plan(segments, leo=100, retention_ms=1, now=now)
    assert p.to_delete == segments[:k]
    assert p.new_log_start_offset == k * 10


def test_walk_stops_at_segment_being_copied() -> None:
    a, b = seg(0, 99), seg(100, 199)
    p = plan([a, b], retention_bytes=0, being_copied=frozenset({a.remote_log_segment_id}))
    assert p.to_delete == []
    assert p.new_log_start_offset is None
    p = plan([a, b], retention_bytes=0, being_copied=frozenset({b.remote_log_segment_id}))
    assert p.to_delete == [a]


def test_size_counts_only_finished_and_dangling_deletes_are_retried() -> None:
    s1 = seg(0, 99, state=S.COPY_SEGMENT_STARTED)
    s2 = seg(100, 199, state=S.DELETE_SEGMENT_FINISHED)
    s3 = seg(100, 199, state=S.DELETE_SEGMENT_STARTED)
    s4 = seg(200, 299, state=S.COPY_SEGMENT_STARTED)
    finished = [seg(300 + i * 100, 399 + i * 100) for i in range(11)]
    p = plan([s1, s2, s3, s4, *finished], leo=2000, retention_bytes=10 * 1024)
    assert p.to_delete == [s1, s3]
    s4_done = seg(200, 299)
    p2 = plan([s4_done, *finished], leo=2000, retention_bytes=10 * 1024)
    assert p2.to_delete == [s4_done, finished[0]]


def test_all_deleted_segments_means_no_work() -> None:
    segments = [seg(0, 99, state=S.DELETE_SEGMENT_FINISHED)]
    p = plan(segments, retention_ms=0)
    assert p.to_delete == [] and p.unreferenced == []
    assert p.new_log_start_offset is None


def test_log_start_breach_deletes_without_moving_start() -> None:
    a, b = seg(0, 99), seg(100, 199)
    p = plan([a, b], log_start=150)
    assert p.to_delete == [a]
    assert p.new_log_start_offset is None


def test_unreferenced_segments_below_earliest_epoch_are_deleted() -> None:
    old = seg(0, 99, {0: 0, 1: 50})
    current = seg(100, 199, {2: 100})
    p = plan([old, current], epochs=[(2, 100)], leo=300)
    assert p.unreferenced == [old]
    assert p.to_delete == []


def test_metrics_count_all_listed_states() -> None:
    segments = [seg(0, 99, size=1024), seg(100, 199, size=1024, state=S.COPY_SEGMENT_STARTED)]
    p = plan(segments)
    assert (p.metadata_count, p.remote_size_bytes) == (2, 2048)


def test_segments_outside_the_lineage_after_an_unclean_election_are_deleted() -> None:
    """The old leader tiered [5-14] at epoch 0; the unclean new leader's lineage has epoch 0
    only up to 4 and epoch 2 from 5 on: those segments are deleted, the shared prefix and
    the new lineage's own upload stay, and the log start does not move."""
    shared = seg(0, 4, {0: 0})
    cut_off = [seg(5, 9, {0: 5}), seg(10, 14, {0: 10})]
    new = seg(5, 9, {2: 5})
    p = plan([shared, *cut_off, new], epochs=[(0, 0), (2, 5)], leo=20)
    assert p.unreferenced == cut_off
    assert p.to_delete == []
    assert p.new_log_start_offset is None
