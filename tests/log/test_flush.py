"""``flush.messages`` with a deferred flush: the append only asks, ``flush_to`` fsyncs."""

from __future__ import annotations

import os
import threading

import pytest

from tests.log.log_helpers import ManagerFactory, batch, new_log
from tierlog.log import LogConfig


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads that call ``os.fsync`` from now on, in order."""
    calls: list[int] = []
    real = os.fsync

    def record(fd: int) -> None:
        calls.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    return calls


def test_a_deferred_append_asks_for_the_flush_instead_of_running_it(
    make_manager: ManagerFactory, fsyncs: list[int]
) -> None:
    part = new_log(make_manager(), LogConfig(flush_messages=3))
    fsyncs.clear()  # creating the log syncs its directory and metadata
    first = [part.append_as_leader(batch(), 0, defer_flush=True) for _ in range(2)]
    assert [r.flush_offset for r in first] == [None, None]
    third = part.append_as_leader(batch(), 0, defer_flush=True)
    assert third.flush_offset == 3
    assert fsyncs == [] and part.recovery_point == 0
    part.flush_to(3)
    assert fsyncs and part.recovery_point == 3
    # the count starts again from the requested flush
    assert part.append_as_leader(batch(2), 0, defer_flush=True).flush_offset is None
    assert part.append_as_leader(batch(), 0, defer_flush=True).flush_offset == 6


def test_a_flush_already_covered_does_not_fsync_again(
    make_manager: ManagerFactory, fsyncs: list[int]
) -> None:
    part = new_log(make_manager(), LogConfig(flush_messages=1))
    one = part.append_as_leader(batch(), 0, defer_flush=True)
    two = part.append_as_leader(batch(), 0, defer_flush=True)
    assert (one.flush_offset, two.flush_offset) == (1, 2)
    part.flush_to(2)
    done = len(fsyncs)
    part.flush_to(1)
    part.flush_to(2)
    assert len(fsyncs) == done and part.recovery_point == 2


def test_after_a_failed_flush_the_next_append_asks_again(
    make_manager: ManagerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = new_log(make_manager(), LogConfig(flush_messages=5))
    assert part.append_as_leader(batch(5), 0, defer_flush=True).flush_offset == 5

    def fail(fd: int) -> None:
        raise OSError(5, "I/O error")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", fail)
        with pytest.raises(OSError):
            part.flush_to(5)
    assert part.recovery_point == 0
    assert part.append_as_leader(batch(), 0, defer_flush=True).flush_offset == 6
    part.flush_to(6)
    assert part.recovery_point == 6


def test_without_defer_the_append_still_flushes_itself(
    make_manager: ManagerFactory, fsyncs: list[int]
) -> None:
    part = new_log(make_manager(), LogConfig(flush_messages=2))
    assert part.append_as_leader(batch(), 0).flush_offset is None
    assert part.recovery_point == 0
    assert part.append_as_leader(batch(), 0).flush_offset is None
    assert fsyncs and part.recovery_point == 2


def test_the_manager_runs_flushes_on_its_pool(
    make_manager: ManagerFactory, fsyncs: list[int]
) -> None:
    mgr = make_manager()
    part = new_log(mgr, LogConfig(flush_messages=1))
    fsyncs.clear()
    result = part.append_as_leader(batch(), 0, defer_flush=True)
    assert result.flush_offset == 1
    mgr.flush_to(part, result.flush_offset).result(timeout=10)
    assert part.recovery_point == 1
    assert fsyncs and threading.get_ident() not in fsyncs


def test_records_waiting_for_their_flush_stay_above_the_high_watermark(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager(), LogConfig(flush_messages=3))
    part.append_as_leader(batch(2), 0, defer_flush=True)
    assert part.high_watermark == 2  # below flush.messages: visible at once, as in Kafka
    asked = part.append_as_leader(batch(2), 0, defer_flush=True)
    assert asked.flush_offset == 4
    part.append_as_leader(batch(), 0, defer_flush=True)
    assert part.log_end_offset == 5
    assert part.high_watermark == 2
    assert part.read(2, 1 << 20).size == 0
    part.flush_to(4)
    assert part.high_watermark == 5


def test_a_failed_flush_keeps_its_records_hidden_until_a_later_flush_covers_them(
    make_manager: ManagerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = new_log(make_manager(), LogConfig(flush_messages=1))
    part.append_as_leader(batch(), 0, defer_flush=True)

    def fail(fd: int) -> None:
        raise OSError(5, "I/O error")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", fail)
        with pytest.raises(OSError):
            part.flush_to(1)
    assert part.high_watermark == 0
    part.append_as_leader(batch(), 0, defer_flush=True)
    part.flush_to(2)
    assert part.high_watermark == 2


def test_the_last_stable_offset_never_passes_the_high_watermark(
    make_manager: ManagerFactory,
) -> None:
    part = new_log(make_manager(), LogConfig(flush_messages=1))
    part.append_as_leader(batch(), 0, defer_flush=True)
    assert (part.log_end_offset, part.high_watermark, part.last_stable_offset) == (1, 0, 0)
    part.flush_to(1)
    assert part.last_stable_offset == part.high_watermark == 1
