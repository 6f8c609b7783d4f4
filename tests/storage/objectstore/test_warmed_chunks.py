"""Warmed chunks are kept in memory, against the read-ahead budget, until a stream takes
them: taken once (never fetched again), their budget given back when taken, when nobody
took them for the idle timeout, or when the plugin closes."""

from __future__ import annotations

from concurrent.futures import Future

from tests.storage.objectstore.objectstore_helpers import ManualClock
from tierlog.storage.objectstore.budget import ReadAheadBudget
from tierlog.storage.objectstore.warmed import Chunk, WarmedChunks

CHUNK = 1024


def held(value: Chunk | None) -> Future[Chunk | None]:
    load: Future[Chunk | None] = Future()
    load.set_running_or_notify_cancel()
    load.set_result(value)
    return load


def setup(clock: ManualClock, chunks: int = 4) -> tuple[ReadAheadBudget, WarmedChunks]:
    budget = ReadAheadBudget(chunks * CHUNK, chunk=CHUNK, idle_s=5.0, clock=clock)
    account = budget.open_in_flight()
    return budget, WarmedChunks(account, idle_s=5.0, clock=clock)


def acquire(budget: ReadAheadBudget, warmed: WarmedChunks, key: tuple[str, int]) -> None:
    assert warmed._account.try_acquire(CHUNK)
    warmed.add(key, held(b"x" * CHUNK), CHUNK)


def test_a_warmed_chunk_is_taken_once_and_gives_its_budget_back() -> None:
    clock = ManualClock()
    budget, warmed = setup(clock)
    acquire(budget, warmed, ("seg", 0))
    assert budget.used == CHUNK
    assert warmed.take(("seg", 0)) == b"x" * CHUNK
    assert budget.used == 0
    assert warmed.take(("seg", 0)) is None  # the caller loads it: nothing kept twice


def test_a_load_still_in_flight_is_waited_for_and_one_not_started_is_cancelled() -> None:
    clock = ManualClock()
    budget, warmed = setup(clock)
    running: Future[Chunk | None] = Future()
    running.set_running_or_notify_cancel()
    queued: Future[Chunk | None] = Future()
    for key, load in ((("seg", 1), running), (("seg", 2), queued)):
        assert warmed._account.try_acquire(CHUNK)
        warmed.add(key, load, CHUNK)
    assert warmed.take(("seg", 2)) is None and queued.cancelled()
    running.set_result(b"y")
    assert warmed.take(("seg", 1)) == b"y"
    assert budget.used == 0


def test_a_failed_load_leaves_the_chunk_to_the_reader() -> None:
    clock = ManualClock()
    budget, warmed = setup(clock)
    assert warmed._account.try_acquire(CHUNK)
    warmed.add(("seg", 3), held(None), CHUNK)
    assert warmed.take(("seg", 3)) is None
    assert budget.used == 0


def test_a_load_that_raised_leaves_the_chunk_to_the_reader() -> None:
    clock = ManualClock()
    budget, warmed = setup(clock)
    raised: Future[Chunk | None] = Future()
    raised.set_running_or_notify_cancel()
    raised.set_exception(OSError("store unreachable"))
    assert warmed._account.try_acquire(CHUNK)
    warmed.add(("seg", 4), raised, CHUNK)
    assert warmed.take(("seg", 4)) is None
    assert budget.used == 0


def test_a_chunk_nobody_takes_is_dropped_after_the_idle_timeout() -> None:
    clock = ManualClock()
    budget, warmed = setup(clock)
    acquire(budget, warmed, ("seg", 0))
    clock.now += 4.0
    acquire(budget, warmed, ("seg", 1))  # within the timeout: both kept
    assert len(warmed) == 2 and budget.used == 2 * CHUNK
    clock.now += 2.0
    assert warmed.take(("other", 0)) is None  # any take sweeps
    assert ("seg", 0) not in warmed and ("seg", 1) in warmed
    assert budget.used == CHUNK


def test_close_drops_everything_and_keeps_nothing_added_after() -> None:
    clock = ManualClock()
    budget, warmed = setup(clock)
    acquire(budget, warmed, ("seg", 0))
    warmed.close()
    assert len(warmed) == 0 and budget.used == 0
    acquire(budget, warmed, ("seg", 1))
    assert len(warmed) == 0 and budget.used == 0
