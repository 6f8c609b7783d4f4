"""Leader-epoch lineage arithmetic over plain data.

Remote segments uploaded by successive leaders can overlap or come from a history that an
unclean election threw away. Every retention and lookup decision therefore checks a segment
against the *current* leader-epoch lineage (spec §1.6) rather than trusting the flat list of
remote segments. These functions take epoch entries as ``(epoch, start_offset)`` pairs sorted
by epoch, so they can be tested without a log, an RLMM or a plugin.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = [
    "EpochEntry",
    "build_filtered_leader_epoch_map",
    "end_offset_for_epoch",
    "epoch_checkpoint_bytes",
    "epoch_entries_in_range",
    "epoch_for_offset",
    "find_highest_remote_offset",
    "find_log_start_offset",
    "is_remote_segment_within_leader_epochs",
    "next_epoch",
]

EpochEntry = tuple[int, int]
"""``(leader epoch, start offset)``."""

UNDEFINED = -1


def build_filtered_leader_epoch_map(epochs: Mapping[int, int]) -> dict[int, int]:
    """Drop epochs that hold no records: of consecutive epochs sharing a start, keep the last."""
    items = sorted(epochs.items())
    out: dict[int, int] = {}
    for i, (epoch, start) in enumerate(items):
        if i + 1 < len(items) and items[i + 1][1] == start:
            continue
        out[epoch] = start
    return out


def is_remote_segment_within_leader_epochs(
    segment_epochs: Mapping[int, int],
    segment_end_offset: int,
    log_end_offset: int,
    leader_epochs: Mapping[int, int],
) -> bool:
    """True when the segment's epochs and offsets agree with the (filtered) leader lineage."""
    if not leader_epochs or not segment_epochs:
        return False
    seg = build_filtered_leader_epoch_map(segment_epochs)
    seg_keys = sorted(seg)
    lead_keys = sorted(leader_epochs)
    seg_last = seg_keys[-1]
    if seg_last < lead_keys[0] or seg_last > lead_keys[-1]:
        return False
    i = bisect.bisect_left(seg_keys, lead_keys[0])
    if i == len(seg_keys):
        return False
    seg_first = seg_keys[i]
    for j in range(i, len(seg_keys)):
        epoch = seg_keys[j]
        offset = seg[epoch]
        if epoch not in leader_epochs:
            return False
        li = bisect.bisect_left(lead_keys, epoch)
        if epoch == seg_first and li > 0 and offset < leader_epochs[epoch]:
            return False
        next_leader = (
            (lead_keys[li + 1], leader_epochs[lead_keys[li + 1]])
            if li + 1 < len(lead_keys)
            else None
        )
        if epoch == seg_last:
            if next_leader is not None and segment_end_offset > next_leader[1] - 1:
                return False
        else:
            next_seg = (seg_keys[j + 1], seg[seg_keys[j + 1]])
            if next_leader != next_seg:
                return False
    return segment_end_offset < log_end_offset


def epoch_for_offset(entries: Sequence[EpochEntry], offset: int) -> int | None:
    """The epoch whose range contains ``offset`` (Kafka's ``epochForOffset``)."""
    previous: int | None = None
    for epoch, start in entries:
        if start == offset:
            return epoch
        if start > offset:
            return previous
        previous = epoch
    return previous


def next_epoch(entries: Sequence[EpochEntry], epoch: int) -> int | None:
    for e, _ in entries:
        if e > epoch:
            return e
    return None


def end_offset_for_epoch(
    entries: Sequence[EpochEntry], requested_epoch: int, log_end_offset: int
) -> tuple[int, int]:
    """Kafka's ``endOffsetFor``: the epoch actually found and the first offset after it."""
    if requested_epoch == UNDEFINED or not entries:
        return UNDEFINED, UNDEFINED
    if entries[-1][0] == requested_epoch:
        return requested_epoch, log_end_offset
    higher = next((e for e in entries if e[0] > requested_epoch), None)
    if higher is None:
        return UNDEFINED, UNDEFINED
    floor = None
    for e in entries:
        if e[0] <= requested_epoch:
            floor = e
    found = floor[0] if floor is not None else requested_epoch
    return found, higher[1]


def find_highest_remote_offset(
    entries: Sequence[EpochEntry],
    log_end_offset: int,
    highest_offset_for_epoch: Callable[[int], int | None],
) -> tuple[int, int]:
    """Highest copied offset that is still inside our lineage, as ``(offset, epoch)``.

    Walks epochs newest first; an unclean election can leave remote data past the local end of
    an epoch, so the answer is clamped to that epoch's end in our own history.
    """
    for epoch, _ in reversed(entries):
        highest = highest_offset_for_epoch(epoch)
        if highest is None:
            continue
        found_epoch, end_offset = end_offset_for_epoch(entries, epoch, log_end_offset)
        if end_offset <= highest:
            return end_offset - 1, found_epoch
        return highest, epoch
    return -1, -1


def find_log_start_offset(
    entries: Sequence[EpochEntry],
    first_start_offset_for_epoch: Callable[[int], int | None],
    local_log_start_offset: int,
) -> int:
    """Start offset of the earliest remote segment, walking epochs oldest first."""
    for epoch, _ in entries:
        start = first_start_offset_for_epoch(epoch)
        if start is not None:
            return start
    return local_log_start_offset


def epoch_entries_in_range(
    entries: Sequence[EpochEntry], start_offset: int, end_offset: int
) -> list[EpochEntry]:
    """Entries covering ``[start_offset, end_offset)``; the first is clamped to the start."""
    out: list[EpochEntry] = []
    floor: EpochEntry | None = None
    for epoch, start in entries:
        if start <= start_offset:
            floor = (epoch, start_offset)
        elif start < end_offset:
            out.append((epoch, start))
    if floor is not None:
        out.insert(0, floor)
    return out


def epoch_checkpoint_bytes(entries: Iterable[EpochEntry]) -> bytes:
    """Kafka's leader-epoch checkpoint text format: version, count, then ``epoch offset`` lines."""
    lines = [f"{epoch} {offset}" for epoch, offset in entries]
    return ("0\n" + f"{len(lines)}\n" + "".join(line + "\n" for line in lines)).encode()
