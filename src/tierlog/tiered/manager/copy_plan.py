"""Which local segments the copy task may upload next (spec §1.4 step 4, §9 item 1)."""

from __future__ import annotations

from collections.abc import Sequence

from tierlog.log import SegmentInfo

__all__ = ["candidate_segments", "copy_lag"]


def candidate_segments(
    segments: Sequence[SegmentInfo],
    from_offset: int,
    last_stable_offset: int,
    *,
    now_ms: int = 0,
    lag_ms: int = 0,
    lag_bytes: int = 0,
) -> list[SegmentInfo]:
    """Sealed segments from the one holding ``from_offset`` whose next segment starts at or
    below the LSO, oldest first.

    The LSO bound keeps a segment that ends inside an open transaction local until the
    transaction resolves. With a copy lag (both ``lag_ms`` and ``lag_bytes`` non-zero) the
    list stops at the first segment that is neither old enough nor followed by enough bytes;
    a negative lag disables that criterion.
    """
    out: list[SegmentInfo] = []
    for i, seg in enumerate(segments):
        if seg.is_active or seg.next_offset <= from_offset:
            continue
        if seg.next_offset > last_stable_offset:
            break
        if lag_ms != 0 and lag_bytes != 0:
            old_enough = lag_ms > 0 and now_ms - seg.largest_timestamp >= lag_ms
            behind = lag_bytes > 0 and sum(s.size for s in segments[i + 1 :]) >= lag_bytes
            if not (old_enough or behind):
                break
        out.append(seg)
    return out


def copy_lag(segments: Sequence[SegmentInfo], highest_remote_offset: int) -> tuple[int, int]:
    """Bytes and count of sealed local segments not yet uploaded (Kafka's copy-lag gauges)."""
    local_only = [s for s in segments if s.base_offset >= highest_remote_offset]
    sealed = [s for s in local_only if not s.is_active]
    return sum(s.size for s in sealed), len(sealed)
