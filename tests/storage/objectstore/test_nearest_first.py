"""The read-ahead GET pool runs the queued task whose chunk is needed soonest.

One worker is held busy by a gate task while the others queue, so the order the queue is
drained in is the pool's choice alone; ranks are read when the worker frees up.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator

import pytest

from tests.helpers.poll import wait_until
from tierlog.storage.objectstore.nearest_first import NearestFirstPool


@pytest.fixture
def pool() -> Iterator[NearestFirstPool]:
    p = NearestFirstPool(1, thread_name_prefix="test-nearest")
    yield p
    p.shutdown(wait=True, cancel_futures=True)


def hold(pool: NearestFirstPool) -> threading.Event:
    """Occupy the pool's one worker until the returned event is set."""
    release = threading.Event()
    started = threading.Event()

    def gate() -> None:
        started.set()
        release.wait(10)

    pool.submit(gate)
    assert started.wait(10)
    return release


def test_the_lowest_rank_runs_first(pool: NearestFirstPool) -> None:
    release = hold(pool)
    ran: list[int] = []
    futures = [pool.submit_ranked(functools.partial(int, r), ran.append, r) for r in (3, 1, 2)]
    release.set()
    for f in futures:
        f.result(10)
    assert ran == [1, 2, 3]


def test_a_rank_is_read_when_a_thread_frees_up_not_when_queued(pool: NearestFirstPool) -> None:
    release = hold(pool)
    ran: list[str] = []
    ranks = {"a": 1, "b": 2}
    fa = pool.submit_ranked(lambda: ranks["a"], ran.append, "a")
    fb = pool.submit_ranked(lambda: ranks["b"], ran.append, "b")
    ranks["a"] = 5  # its reader moved on: "b" is needed sooner now
    release.set()
    fa.result(10)
    fb.result(10)
    assert ran == ["b", "a"]


def test_equal_ranks_run_oldest_first_and_unranked_tasks_last(pool: NearestFirstPool) -> None:
    release = hold(pool)
    ran: list[str] = []
    futures = [
        pool.submit(ran.append, "unranked"),
        pool.submit_ranked(lambda: 4, ran.append, "first 4"),
        pool.submit_ranked(lambda: 4, ran.append, "second 4"),
    ]
    release.set()
    for f in futures:
        f.result(10)
    assert ran == ["first 4", "second 4", "unranked"]


def test_a_cancelled_task_never_runs_and_a_failing_one_reports_on_its_future(
    pool: NearestFirstPool,
) -> None:
    release = hold(pool)
    ran: list[str] = []
    cancelled = pool.submit_ranked(lambda: 0, ran.append, "cancelled")
    assert cancelled.cancel()

    def fail() -> None:
        raise OSError("store unreachable")

    def broken_rank() -> int:
        raise ValueError("no rank")

    failing = pool.submit_ranked(lambda: 1, fail)
    unrankable = pool.submit_ranked(broken_rank, ran.append, "unrankable")
    release.set()
    with pytest.raises(OSError, match="store unreachable"):
        failing.result(10)
    unrankable.result(10)  # a rank that raises puts its task last, it still runs
    assert ran == ["unrankable"]


def test_shutdown_cancels_what_is_queued_and_refuses_more() -> None:
    pool = NearestFirstPool(1, thread_name_prefix="test-nearest")
    release = hold(pool)
    queued = pool.submit_ranked(lambda: 0, lambda: None)
    release.set()
    pool.shutdown(wait=True, cancel_futures=True)
    assert queued.cancelled() or queued.done()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)


def test_no_more_than_the_workers_run_at_once() -> None:
    pool = NearestFirstPool(3, thread_name_prefix="test-nearest")
    lock = threading.Lock()
    running = 0
    peak = 0
    release = threading.Event()

    def task() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(10)
        with lock:
            running -= 1

    try:
        futures = [pool.submit_ranked(lambda: 0, task) for _ in range(8)]
        wait_until(lambda: running == 3, what="three tasks running")
        release.set()
        for f in futures:
            f.result(10)
        assert peak == 3
    finally:
        release.set()
        pool.shutdown(wait=True)
