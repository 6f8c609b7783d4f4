"""Spec §1.6 and §5.1 items 8-12, 19-20, §5.2 items 31-33: lineage arithmetic."""

from __future__ import annotations

import pytest

from tierlog.tiered.manager.lineage import (
    build_filtered_leader_epoch_map,
    end_offset_for_epoch,
    epoch_checkpoint_bytes,
    epoch_entries_in_range,
    epoch_for_offset,
    find_highest_remote_offset,
    find_log_start_offset,
    is_remote_segment_within_leader_epochs,
)


def test_build_filtered_leader_epoch_map_keeps_last_of_equal_starts() -> None:
    epochs = {0: 0, 1: 0, 2: 0, 3: 30, 4: 40, 5: 60, 6: 60, 7: 70, 8: 70}
    assert build_filtered_leader_epoch_map(epochs) == {2: 0, 3: 30, 4: 40, 6: 60, 8: 70}


LEADER = {0: 0, 1: 10, 2: 20, 3: 30, 4: 40, 5: 50, 7: 70}


@pytest.mark.parametrize(
    ("epochs", "end"),
    [
        ({1: 15, 2: 20, 3: 30}, 35),
        ({1: 15}, 19),
        ({0: 0}, 5),
        ({7: 70}, 75),
        ({1: 15, 2: 20}, 29),
    ],
)
def test_segment_within_lineage_is_valid(epochs: dict[int, int], end: int) -> None:
    assert is_remote_segment_within_leader_epochs(epochs, end, 90, LEADER)


@pytest.mark.parametrize(
    ("epochs", "end"),
    [
        ({5: 55, 6: 60, 7: 70}, 85),  # epoch 6 unknown to the leader
        ({1: 15, 2: 20, 4: 40}, 45),  # epoch 3 missing
        ({7: 70}, 95),  # past LEO
        ({7: 70}, 90),  # equal to LEO
        ({1: 5, 2: 20}, 25),  # starts before epoch 1
        ({1: 15, 2: 20}, 35),  # epoch 2 ends at 29 in the lineage
    ],
)
def test_segment_outside_lineage_is_invalid(epochs: dict[int, int], end: int) -> None:
    assert not is_remote_segment_within_leader_epochs(epochs, end, 90, LEADER)


def test_lineage_after_truncation() -> None:
    leader = {7: 51, 9: 100}
    assert is_remote_segment_within_leader_epochs({5: 14, 7: 15, 9: 100}, 150, 210, leader)
    for epochs, end in [
        ({2: 5, 3: 6}, 10),
        ({7: 15, 9: 100, 10: 200}, 205),
        ({8: 75}, 80),
        ({7: 15, 9: 101}, 150),
        ({9: 99}, 150),
    ]:
        assert not is_remote_segment_within_leader_epochs(epochs, end, 210, leader), epochs


def test_find_highest_remote_offset_on_empty_remote_storage() -> None:
    assert find_highest_remote_offset([(0, 0), (1, 500)], 600, lambda e: None) == (-1, -1)


def test_find_highest_remote_offset_normal_case() -> None:
    highest = {0: 200}
    assert find_highest_remote_offset([(0, 0), (1, 500)], 600, highest.get) == (200, 0)


def test_find_highest_remote_offset_clamps_after_unclean_election() -> None:
    highest = {0: 200}
    entries = [(0, 0), (1, 150), (2, 300)]
    assert find_highest_remote_offset(entries, 400, highest.get) == (149, 0)


def test_find_log_start_offset_walks_epochs_upward() -> None:
    firsts = {1: 500}
    assert find_log_start_offset([(0, 0), (1, 250), (2, 550)], firsts.get, 250) == 500


def test_find_log_start_offset_falls_back_to_local_start() -> None:
    assert find_log_start_offset([(0, 0), (1, 250), (2, 550)], lambda e: None, 250) == 250


def test_epoch_checkpoint_bytes_format() -> None:
    assert epoch_checkpoint_bytes([(0, 1)]).decode().splitlines() == ["0", "1", "0 1"]
    assert epoch_checkpoint_bytes([]) == b"0\n0\n"


def test_epoch_entries_in_range_is_start_inclusive_end_exclusive() -> None:
    entries = [(0, 0), (1, 100), (2, 200)]
    assert epoch_entries_in_range(entries, 0, 300) == entries
    assert epoch_entries_in_range(entries, 100, 200) == [(1, 100)]
    assert epoch_entries_in_range(entries, 50, 150) == [(0, 50), (1, 100)]


def test_epoch_for_offset_and_end_offset() -> None:
    entries = [(0, 0), (1, 100), (3, 200)]
    assert epoch_for_offset(entries, 0) == 0
    assert epoch_for_offset(entries, 150) == 1
    assert epoch_for_offset(entries, 999) == 3
    assert epoch_for_offset([(2, 10)], 5) is None
    assert end_offset_for_epoch(entries, 3, 250) == (3, 250)
    assert end_offset_for_epoch(entries, 2, 250) == (1, 200)
    assert end_offset_for_epoch(entries, 9, 250) == (-1, -1)
