"""Crash safety of the cleaner's file protocol: a crash at each phase, then a load.

Each test cleans a log in which a crash is injected at one step of ``cleaner.swap``'s
protocol (the files stay as the crash left them), drops the log without any shutdown work,
and loads the directory again. The loaded log must read exactly as the uncleaned log (the
swap had not become the truth) or exactly as the cleaned one (it had), with no ``.cleaned``
or ``.swap`` file left and no offset twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import tierlog.log.partition_log as partition_log_module
from tests.log.cleaner_helpers import Row, clean_fully, keyed_batch, make_cleaner, read_rows
from tests.log.log_helpers import TOPIC_ID, TP, ManualClock
from tierlog.log import LogConfig, LogManager, PartitionLog
from tierlog.log.cleaner import swap
from tierlog.log.cleaner.cleaned_segment import CleanedSegmentWriter

StrPath = str | os.PathLike[str]
CONFIG = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=1 << 20,
    min_cleanable_dirty_ratio=0.01,
    file_delete_delay_ms=60_000,
)


class Crash(BaseException):
    """Stands for the process dying: nothing catches it and no cleanup runs."""


def _fill(plog: PartitionLog, clock: ManualClock) -> None:
    """Four sealed segments that the cleaner merges into one group, so one swap decides
    between the whole uncleaned and the whole cleaned log."""
    for i in range(120):
        value = None if i % 17 == 16 else b"v%03d" % i
        plog.append_as_leader(keyed_batch([(b"k%d" % (i % 5), value)], ts=clock.now), 0)
        if i % 30 == 29:
            plog.roll()


def _open(data_dir: Path, clock: ManualClock) -> tuple[LogManager, PartitionLog]:
    mgr = LogManager([data_dir], CONFIG, clock=clock)
    mgr.load({TP.topic: CONFIG})
    plog = mgr.get_log(TP) or mgr.create_log(TP, TOPIC_ID, CONFIG)
    return mgr, plog


def _expected(tmp_path: Path, clock: ManualClock) -> tuple[list[Row], list[Row]]:
    mgr, plog = _open(tmp_path / "reference", clock)
    _fill(plog, clock)
    uncleaned = read_rows(plog)
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    clean_fully(service, worker, clock.now)
    cleaned = read_rows(plog)
    assert cleaned != uncleaned
    mgr.shutdown()
    return uncleaned, cleaned


def _crash_and_reload(
    tmp_path: Path, clock: ManualClock, arm: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Row], Path]:
    data_dir = tmp_path / "crashed"
    mgr, plog = _open(data_dir, clock)
    _fill(plog, clock)
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    arm()
    with pytest.raises(Crash):
        service.clean_once(worker, clock.now)
    monkeypatch.undo()
    for seg_log in mgr.all_logs():  # the process is gone: release fds, write nothing
        seg_log.closed = True
        for seg in seg_log._segments:
            seg.close()
    again, reloaded = _open(data_dir, clock)
    rows = read_rows(reloaded)
    part_dir = reloaded.dir
    leftovers = [p.name for p in part_dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert not leftovers
    offsets = [r[0] for r in rows]
    assert len(offsets) == len(set(offsets))
    again.shutdown()
    return rows, part_dir


def test_crash_while_writing_cleaned_files_rolls_back(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    uncleaned, _ = _expected(tmp_path, clock)

    def arm() -> None:
        def finish(self: CleanedSegmentWriter, mtime_s: float | None) -> None:
            raise Crash

        monkeypatch.setattr(CleanedSegmentWriter, "finish", finish)
        monkeypatch.setattr(CleanedSegmentWriter, "abandon", lambda self: None)

    rows, _ = _crash_and_reload(tmp_path, clock, arm, monkeypatch)
    assert rows == uncleaned


def test_crash_midway_through_renaming_to_swap_rolls_back(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    uncleaned, _ = _expected(tmp_path, clock)
    real_replace = os.replace

    def arm() -> None:
        calls = {"n": 0}

        def replace(src: StrPath, dst: StrPath) -> None:
            if str(dst).endswith(".swap"):
                calls["n"] += 1
                if calls["n"] == 2:
                    raise Crash
            real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)

    rows, _ = _crash_and_reload(tmp_path, clock, arm, monkeypatch)
    assert rows == uncleaned


def test_crash_after_renaming_to_swap_completes(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cleaned = _expected(tmp_path, clock)
    real = swap.cleaned_to_swap

    def arm() -> None:
        def cleaned_to_swap(directory: Path, base: int) -> None:
            real(directory, base)
            raise Crash

        monkeypatch.setattr(partition_log_module, "cleaned_to_swap", cleaned_to_swap)

    rows, _ = _crash_and_reload(tmp_path, clock, arm, monkeypatch)
    assert rows == cleaned


@pytest.mark.parametrize("restore_one_old_segment", [False, True])
def test_crash_during_the_swap_completes(
    tmp_path: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    restore_one_old_segment: bool,
) -> None:
    """Old segments renamed to ``.deleted`` (all, or all but one: a crash in the middle of
    that step), the cleaned segment still ``.swap``."""
    _, cleaned = _expected(tmp_path, clock)

    def arm() -> None:
        def swap_to_final(directory: Path, base: int) -> None:
            if restore_one_old_segment:
                deleted = sorted(directory.glob("*.log.deleted"))
                last = deleted[-1]
                last.rename(last.with_name(last.name.removesuffix(".deleted")))
            raise Crash

        monkeypatch.setattr(partition_log_module, "swap_to_final", swap_to_final)

    rows, _ = _crash_and_reload(tmp_path, clock, arm, monkeypatch)
    assert rows == cleaned


def test_crash_midway_through_the_final_renames_completes(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cleaned = _expected(tmp_path, clock)
    real_replace = os.replace

    def arm() -> None:
        def replace(src: StrPath, dst: StrPath) -> None:
            if str(src).endswith(".swap"):
                raise Crash  # the index got its final name, the log is still .swap
            real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)

        real_final = swap.swap_to_final

        def swap_to_final(directory: Path, base: int) -> None:
            index = directory / f"{base:020d}.index.swap"
            real_replace(index, index.with_name(index.name.removesuffix(".swap")))
            real_final(directory, base)

        monkeypatch.setattr(partition_log_module, "swap_to_final", swap_to_final)

    rows, _ = _crash_and_reload(tmp_path, clock, arm, monkeypatch)
    assert rows == cleaned
