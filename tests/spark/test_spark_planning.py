"""Planning of input partitions: exact coverage, tier choice, splits, data-loss reporting."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tierlog.spark.planning import (
    ColdSegment,
    Slice,
    cap_records,
    ensure_min_partitions,
    plan_partition,
    rate_limit,
    split_large_segments,
    split_points,
)

TP = ("t", 0)


def seg(first: int, last: int, size: int = 100, ref: str = "") -> ColdSegment:
    return ColdSegment(first, last, size, ref or f"{first}-{last}")


def covered(slices: list[Slice]) -> list[int]:
    return [o for s in slices for o in range(s.start, s.end)]


def test_remote_segments_first_then_broker_tail() -> None:
    plan = plan_partition(TP, 0, 100, 0, 100, [seg(0, 29), seg(30, 59)])
    assert [(s.start, s.end, s.segment is not None) for s in plan.slices] == [
        (0, 30, True),
        (30, 60, True),
        (60, 100, False),
    ]
    assert plan.lost == []


def test_range_starting_inside_a_segment_needs_an_index_lookup() -> None:
    plan = plan_partition(TP, 45, 50, 0, 100, [seg(30, 59)])
    assert plan.slices == [Slice(TP, 45, 50, seg(30, 59), -1)]


def test_overlapping_uploads_give_each_offset_once() -> None:
    segs = [seg(0, 49, ref="old"), seg(0, 29, ref="a"), seg(30, 79, ref="new")]
    plan = plan_partition(TP, 0, 100, 0, 100, segs)
    assert covered(plan.slices) == list(range(100))
    assert [s.segment.ref if s.segment else None for s in plan.slices] == ["old", "new", None]


def test_gap_between_segments_is_read_through_the_broker() -> None:
    plan = plan_partition(TP, 0, 100, 0, 100, [seg(0, 19), seg(40, 59)])
    assert [(s.start, s.end, s.segment is None) for s in plan.slices] == [
        (0, 20, False),
        (20, 40, True),
        (40, 60, False),
        (60, 100, True),
    ]


def test_offsets_below_log_start_are_lost() -> None:
    plan = plan_partition(TP, 0, 100, 50, 100, [seg(40, 69)])
    assert [(lo.start, lo.end) for lo in plan.lost] == [(0, 50)]
    assert covered(plan.slices) == list(range(50, 100))
    assert plan.lost[0].describe() == "offsets [0, 50) of t-0"


def test_without_a_broker_uncovered_offsets_are_lost() -> None:
    plan = plan_partition(TP, 0, 100, 0, 100, [seg(0, 49)], broker=False)
    assert [(lo.start, lo.end) for lo in plan.lost] == [(50, 100)]


def test_end_is_clamped_to_the_high_watermark() -> None:
    plan = plan_partition(TP, 0, 1000, 0, 70, [seg(0, 49)])
    assert covered(plan.slices) == list(range(70))


def test_split_points_follow_the_index_at_byte_multiples() -> None:
    index = [(o, o * 10) for o in range(0, 1000, 10)]  # a batch every 10 offsets, 100 B each
    assert split_points(index, 0, 1000, 2500) == [(250, 2500), (500, 5000), (750, 7500)]
    assert split_points(index, 300, 600, 2500) == [(500, 5000)]


def test_large_segments_split_with_known_positions() -> None:
    big = seg(0, 999, size=10_000)
    index = [(o, o * 10) for o in range(0, 1000, 10)]
    out = split_large_segments([Slice(TP, 0, 1000, big, 0)], 2500, lambda s: index)
    # each slice reads through the batch holding its last offsets, up to the next one
    assert [(s.start, s.end, s.position, s.end_position) for s in out] == [
        (0, 250, 0, 2599),
        (250, 500, 2500, 5099),
        (500, 750, 5000, 7599),
        (750, 1000, 7500, -1),
    ]


def test_max_records_per_partition_caps_every_slice() -> None:
    out = cap_records([Slice(TP, 0, 10), Slice(TP, 10, 13)], 4)
    assert [(s.start, s.end) for s in out] == [(0, 3), (3, 6), (6, 10), (10, 13)]
    assert all(s.size <= 4 for s in out)


def test_min_partitions_splits_in_proportion() -> None:
    out = ensure_min_partitions([Slice(TP, 0, 90), Slice(("t", 1), 0, 10)], 10)
    assert len(out) == 10
    assert sum(1 for s in out if s.tp == TP) == 9


@given(
    bounds=st.lists(st.integers(0, 200), min_size=2, max_size=12, unique=True),
    start=st.integers(0, 220),
    length=st.integers(0, 220),
    log_start=st.integers(0, 60),
)
def test_any_plan_covers_each_available_offset_exactly_once(
    bounds: list[int], start: int, length: int, log_start: int
) -> None:
    b = sorted(bounds)
    segs = [seg(lo, hi - 1) for lo, hi in zip(b[::2], b[1::2], strict=False) if hi > lo]
    plan = plan_partition(TP, start, start + length, log_start, 200, segs)
    end = min(start + length, 200)
    assert covered(plan.slices) == list(range(max(start, log_start), end))
    lost = [o for lo in plan.lost for o in range(lo.start, lo.end)]
    assert lost == list(range(start, min(log_start, end)))
    pieces = cap_records(ensure_min_partitions(plan.slices, 7), 13)
    assert covered(pieces) == covered(plan.slices)


def test_rate_limit_prorates_backlog_like_spark() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 5, ("t", 3): 7}
    out = rate_limit(start, latest, 100)
    assert out == {("t", 0): 90, ("t", 1): 110, ("t", 2): 5, ("t", 3): 7}
    tiny = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10_000, ("t", 1): 1}, 10)
    assert tiny == {("t", 0): 9, ("t", 1): 1}
