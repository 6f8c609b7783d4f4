"""Spec §5.5 examples 52-55 against ``RemoteLogMetadataCache``."""

from __future__ import annotations

import pytest

from tests.tiered.metadata.metadata_factories import segment, update
from tierlog.tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
)
from tierlog.tiered.api import (
    RemoteLogSegmentState as S,
)
from tierlog.tiered.metadata import RemoteLogMetadataCache


def state_of(cache: RemoteLogMetadataCache, m: RemoteLogSegmentMetadata) -> S | None:
    for x in cache.list_all_remote_log_segments():
        if x.remote_log_segment_id == m.remote_log_segment_id:
            return x.state
    return None


# 52
def test_add_none_is_rejected() -> None:
    with pytest.raises(TypeError):
        RemoteLogMetadataCache().add_copy_in_progress_segment(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("state", [s for s in S if s is not S.COPY_SEGMENT_STARTED])
def test_add_in_any_state_but_copy_started_is_rejected(state: S) -> None:
    base = segment(0, 100)
    m = base.create_with_updates(update(base, state))
    with pytest.raises(ValueError, match="COPY_SEGMENT_STARTED"):
        RemoteLogMetadataCache().add_copy_in_progress_segment(m)


# 53
def test_update_none_is_rejected() -> None:
    with pytest.raises(TypeError):
        RemoteLogMetadataCache().update_remote_log_segment_metadata(None)  # type: ignore[arg-type]


def test_update_of_unknown_segment_raises_once_initialized() -> None:
    cache = RemoteLogMetadataCache()
    cache.mark_initialized()
    with pytest.raises(RemoteResourceNotFoundException):
        cache.update_remote_log_segment_metadata(update(segment(0, 100), S.COPY_SEGMENT_FINISHED))


def test_update_of_unknown_segment_is_ignored_while_replaying() -> None:
    cache = RemoteLogMetadataCache()
    cache.update_remote_log_segment_metadata(update(segment(0, 100), S.COPY_SEGMENT_FINISHED))
    assert cache.is_empty()
    assert cache.highest_offset_for_epoch(0) is None


# 54
@pytest.mark.parametrize(
    ("path", "invalid", "stays"),
    [
        ([], S.DELETE_SEGMENT_FINISHED, S.COPY_SEGMENT_STARTED),
        ([S.COPY_SEGMENT_FINISHED], S.DELETE_SEGMENT_FINISHED, S.COPY_SEGMENT_FINISHED),
        ([S.COPY_SEGMENT_FINISHED], S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
        (
            [S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED],
            S.COPY_SEGMENT_FINISHED,
            S.DELETE_SEGMENT_STARTED,
        ),
        (
            [S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED],
            S.COPY_SEGMENT_STARTED,
            S.DELETE_SEGMENT_STARTED,
        ),
    ],
)
def test_invalid_transition_is_dropped(path: list[S], invalid: S, stays: S) -> None:
    cache = RemoteLogMetadataCache()
    cache.mark_initialized()
    m = segment(10, 100, {5: 10})
    cache.add_copy_in_progress_segment(m)
    for s in path:
        cache.update_remote_log_segment_metadata(update(m, s))
    before_lookup = cache.remote_log_segment_metadata(5, 50)
    before_highest = cache.highest_offset_for_epoch(5)
    cache.update_remote_log_segment_metadata(update(m, invalid))
    assert state_of(cache, m) is stays
    assert cache.remote_log_segment_metadata(5, 50) == before_lookup
    assert cache.highest_offset_for_epoch(5) == before_highest
    assert [x.state for x in cache.list_remote_log_segments(5)] == [stays]


def test_valid_path_to_delete_finished_empties_listing() -> None:
    cache = RemoteLogMetadataCache()
    cache.mark_initialized()
    m = segment(10, 100, {5: 10})
    cache.add_copy_in_progress_segment(m)
    for s in (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED):
        cache.update_remote_log_segment_metadata(update(m, s))
        if s is not S.DELETE_SEGMENT_FINISHED:
            assert state_of(cache, m) is s
    assert cache.list_remote_log_segments(5) == []
    assert cache.list_all_remote_log_segments() == []


def test_re_adding_a_finished_segment_is_dropped() -> None:
    cache = RemoteLogMetadataCache()
    m = segment(10, 100)
    cache.add_copy_in_progress_segment(m)
    cache.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    cache.add_copy_in_progress_segment(m)
    assert state_of(cache, m) is S.COPY_SEGMENT_FINISHED
    assert cache.remote_log_segment_metadata(0, 50) is not None


def test_self_transition_is_idempotent() -> None:
    cache = RemoteLogMetadataCache()
    m = segment(10, 100)
    cache.add_copy_in_progress_segment(m)
    cache.add_copy_in_progress_segment(m)
    cache.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    snap = cache.to_snapshot(m.topic_id_partition, 0)
    cache.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    assert cache.to_snapshot(m.topic_id_partition, 0) == snap


def test_copy_started_can_go_straight_to_delete_started() -> None:
    cache = RemoteLogMetadataCache()
    m = segment(10, 100)
    cache.add_copy_in_progress_segment(m)
    cache.update_remote_log_segment_metadata(update(m, S.DELETE_SEGMENT_STARTED))
    assert state_of(cache, m) is S.DELETE_SEGMENT_STARTED
    assert cache.highest_offset_for_epoch(0) is None


# 55
@pytest.fixture
def lifecycle() -> tuple[RemoteLogMetadataCache, list[RemoteLogSegmentMetadata]]:
    cache = RemoteLogMetadataCache()
    cache.mark_initialized()
    seg0 = segment(0, 100, {0: 0, 1: 20, 2: 80})
    cache.add_copy_in_progress_segment(seg0)
    assert cache.remote_log_segment_metadata(1, 40) is None
    assert [cache.highest_offset_for_epoch(e) for e in (0, 1, 2)] == [None, None, None]
    cache.update_remote_log_segment_metadata(update(seg0, S.COPY_SEGMENT_FINISHED))
    segs = [
        seg0,
        segment(101, 200, {2: 101}),
        segment(201, 300, {2: 201, 3: 240}),
        segment(250, 400, {3: 250, 4: 370}),
    ]
    for s in segs[1:]:
        cache.add_copy_in_progress_segment(s)
        cache.update_remote_log_segment_metadata(update(s, S.COPY_SEGMENT_FINISHED))
    return cache, segs


def ids(ms: list[RemoteLogSegmentMetadata]) -> list[object]:
    return [m.remote_log_segment_id for m in ms]


def test_copy_started_segment_becomes_visible_once_finished(
    lifecycle: tuple[RemoteLogMetadataCache, list[RemoteLogSegmentMetadata]],
) -> None:
    cache, segs = lifecycle
    found = cache.remote_log_segment_metadata(1, 40)
    assert found is not None and found.remote_log_segment_id == segs[0].remote_log_segment_id


@pytest.mark.parametrize(
    ("epoch", "offset", "expected"),
    [(1, 40, 0), (2, 110, 1), (3, 240, 2), (3, 250, 3), (4, 375, 3)],
)
def test_lookup_finds_covering_segment(
    lifecycle: tuple[RemoteLogMetadataCache, list[RemoteLogSegmentMetadata]],
    epoch: int,
    offset: int,
    expected: int,
) -> None:
    cache, segs = lifecycle
    found = cache.remote_log_segment_metadata(epoch, offset)
    assert found is not None
    assert found.remote_log_segment_id == segs[expected].remote_log_segment_id


@pytest.mark.parametrize(("epoch", "offset"), [(1, 110), (4, 401), (5, 301)])
def test_lookup_outside_epoch_range_is_empty(
    lifecycle: tuple[RemoteLogMetadataCache, list[RemoteLogSegmentMetadata]],
    epoch: int,
    offset: int,
) -> None:
    cache, _ = lifecycle
    assert cache.remote_log_segment_metadata(epoch, offset) is None


def test_highest_offset_per_epoch_and_not_decremented_on_delete(
    lifecycle: tuple[RemoteLogMetadataCache, list[RemoteLogSegmentMetadata]],
) -> None:
    cache, segs = lifecycle
    expected = {0: 19, 1: 79, 2: 239, 3: 369, 4: 400, 5: None}
    assert {e: cache.highest_offset_for_epoch(e) for e in expected} == expected
    cache.update_remote_log_segment_metadata(update(segs[0], S.DELETE_SEGMENT_STARTED))
    assert cache.remote_log_segment_metadata(0, 10) is None
    assert cache.highest_offset_for_epoch(0) == 19
    cache.update_remote_log_segment_metadata(update(segs[0], S.DELETE_SEGMENT_FINISHED))
    assert cache.highest_offset_for_epoch(0) == 19


def test_started_and_delete_started_are_listed_delete_finished_is_not(
    lifecycle: tuple[RemoteLogMetadataCache, list[RemoteLogSegmentMetadata]],
) -> None:
    cache, segs = lifecycle
    started = segment(401, 500, {4: 401})
    cache.add_copy_in_progress_segment(started)
    cache.update_remote_log_segment_metadata(update(segs[0], S.DELETE_SEGMENT_STARTED))
    assert ids(cache.list_remote_log_segments(4)) == ids([segs[3], started])
    assert ids(cache.list_remote_log_segments(0)) == ids([segs[0]])
    assert len(cache.list_all_remote_log_segments()) == 5
    cache.update_remote_log_segment_metadata(update(segs[0], S.DELETE_SEGMENT_FINISHED))
    assert cache.list_remote_log_segments(0) == []
    assert segs[0].remote_log_segment_id not in ids(cache.list_all_remote_log_segments())


def test_listing_by_epoch_is_sorted_and_filtered(
    lifecycle: tuple[RemoteLogMetadataCache, list[RemoteLogSegmentMetadata]],
) -> None:
    cache, segs = lifecycle
    assert ids(cache.list_remote_log_segments(2)) == ids(segs[0:3])
    assert ids(cache.list_remote_log_segments(1)) == ids(segs[0:1])
    assert ids(cache.list_remote_log_segments(3)) == ids(segs[2:4])
    assert cache.list_remote_log_segments(9) == []


def test_next_segment_with_txn_index_skips_segments_without_one() -> None:
    cache = RemoteLogMetadataCache()
    a = segment(0, 99, txn_idx_empty=True)
    b = segment(100, 199, txn_idx_empty=True)
    c = segment(200, 299, txn_idx_empty=False)
    for m in (a, b, c):
        cache.add_copy_in_progress_segment(m)
        cache.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    found = cache.next_segment_with_txn_index(0, 50)
    assert found is not None and found.remote_log_segment_id == c.remote_log_segment_id
    assert cache.next_segment_with_txn_index(0, 300) is None
    assert cache.next_segment_with_txn_index(1, 0) is None
