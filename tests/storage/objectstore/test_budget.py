"""The broker-wide read-ahead budget on a fake clock: bounded, fair, and given back by idle
streams."""

from __future__ import annotations

from tests.storage.objectstore.objectstore_helpers import ManualClock
from tierlog.storage.objectstore.budget import ReadAheadBudget

CHUNK = 100


def test_nothing_is_granted_past_the_total() -> None:
    budget = ReadAheadBudget(10 * CHUNK, chunk=CHUNK, idle_s=5, clock=ManualClock())
    accounts = [budget.open(lambda: None) for _ in range(16)]
    granted = 0
    for _ in range(4):
        for a in accounts:
            granted += a.try_acquire(CHUNK)
    assert granted == 10 and budget.used == budget.peak == 10 * CHUNK


def test_a_stream_over_its_share_waits_until_it_has_drained_to_it() -> None:
    budget = ReadAheadBudget(8 * CHUNK, chunk=CHUNK, idle_s=5, clock=ManualClock())
    first = budget.open(lambda: None)
    assert all(first.try_acquire(CHUNK) for _ in range(8))  # alone: the whole budget
    second = budget.open(lambda: None)
    assert budget.share() == 4 * CHUNK
    assert not second.try_acquire(CHUNK)  # full
    for _ in range(3):
        first.release(CHUNK)
        assert not first.try_acquire(CHUNK)  # over its share of 4: no more for it
        assert second.try_acquire(CHUNK)  # the freed chunk goes to the newcomer
    assert first.held == 5 * CHUNK and second.held == 3 * CHUNK
    first.release(CHUNK)
    assert second.try_acquire(CHUNK)
    assert first.held == second.held == 4 * CHUNK


def test_an_idle_stream_gives_its_share_back() -> None:
    clock = ManualClock()
    dropped: list[str] = []
    budget = ReadAheadBudget(4 * CHUNK, chunk=CHUNK, idle_s=5, clock=clock)
    idle = budget.open(lambda: dropped.append("idle"))
    assert all(idle.try_acquire(CHUNK) for _ in range(4))
    busy = budget.open(lambda: dropped.append("busy"))
    assert not busy.try_acquire(CHUNK)
    clock.now = 6.0  # idle took and consumed nothing for longer than idle_s
    assert busy.try_acquire(CHUNK)
    assert dropped == ["idle"] and idle.held == 0 and budget.used == CHUNK
    assert budget.share() == 4 * CHUNK  # the idle stream no longer counts
    idle.release(CHUNK)  # a late release of a reclaimed chunk changes nothing
    assert budget.used == CHUNK
    idle.close()
    busy.close()
    assert budget.used == 0


def test_an_ask_refused_does_not_keep_a_stream_active() -> None:
    # a stream whose reader stopped still asks as its last read-ahead GETs land; taking
    # nothing, it must still go idle and give its holding to a stream that reads
    clock = ManualClock()
    dropped: list[str] = []
    budget = ReadAheadBudget(2 * CHUNK, chunk=CHUNK, idle_s=5, clock=clock)
    stopped = budget.open(lambda: dropped.append("stopped"))
    assert stopped.try_acquire(CHUNK) and stopped.try_acquire(CHUNK)
    reading = budget.open(lambda: dropped.append("reading"))
    clock.now = 6.0
    assert not stopped.try_acquire(CHUNK)  # full, and reclaiming its own holding is no help
    assert reading.try_acquire(CHUNK)
    assert dropped == ["stopped"] and stopped.held == 0 and reading.held == CHUNK


def test_loads_in_flight_are_no_stream_and_are_never_reclaimed() -> None:
    clock = ManualClock()
    budget = ReadAheadBudget(4 * CHUNK, chunk=CHUNK, idle_s=5, clock=clock)
    warm = budget.open_in_flight()
    stream = budget.open(lambda: None)
    assert budget.share() == 4 * CHUNK  # the only stream may have the whole budget
    assert warm.try_acquire(CHUNK)
    assert budget.share() == 4 * CHUNK  # loading for warm does not make it a stream
    assert all(stream.try_acquire(CHUNK) for _ in range(3))
    clock.now = 6.0  # both idle
    newcomer = budget.open(lambda: None)
    assert newcomer.try_acquire(CHUNK)  # the idle stream's holding comes back
    assert stream.held == 0 and warm.held == CHUNK  # not the GET still in flight
    assert budget.used == 2 * CHUNK
    warm.release(CHUNK)
    assert budget.used == CHUNK


def test_closing_gives_everything_back_and_a_closed_budget_grants_nothing() -> None:
    budget = ReadAheadBudget(4 * CHUNK, chunk=CHUNK, idle_s=5, clock=ManualClock())
    a = budget.open(lambda: None)
    assert a.try_acquire(3 * CHUNK)
    a.close()
    assert budget.used == 0
    budget.close()
    assert not budget.open(lambda: None).try_acquire(CHUNK)
