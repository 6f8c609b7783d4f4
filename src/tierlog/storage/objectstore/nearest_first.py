"""The read-ahead GET pool: a fixed number of threads that take the chunk needed soonest.

A store whose bandwidth is the limit shares it between the GETs in flight, so GETs that
start together land together, and which chunks hold the ``prefetch.max.concurrency`` GET
slots decides what the readers get next. With a first-in-first-out queue (the standard
library's ``ThreadPoolExecutor``) the streams that asked first take every slot: traced with
one consumer reading eight partitions in step, three partitions had their next 8 chunks in
flight while two had 1, and once those landed the consumer's Fetches came back with the two
partitions empty for a third of a second, waiting for chunks that had only then started.

Each task here carries a rank, the chunks its reader has still to consume before it needs
that chunk, evaluated when a thread becomes free (a reader moves on while its chunks wait),
and the lowest rank runs first, the oldest among equals. Readers in step then share the
slots chunk for chunk. The queue holds at most the budget's chunks (every queued chunk holds
its share of the read-ahead budget), so the scan for the lowest rank is over a few dozen
entries, once per GET.

No maintained library offers an executor with a priority that changes while a task waits
(``queue.PriorityQueue`` fixes each entry's priority when it is put), hence this module.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

__all__ = ["LAST", "NearestFirstPool"]

P = ParamSpec("P")
T = TypeVar("T")

#: The rank of a task with none of its own: after every ranked one.
LAST = 1 << 30


@dataclass(slots=True)
class _Task:
    rank: Callable[[], int]
    seq: int
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def _last() -> int:
    return LAST


class NearestFirstPool(Executor):
    """Up to ``workers`` threads, started as tasks arrive; each free thread runs the queued
    task of lowest ``rank()``. Owned and shut down by the plugin that creates it."""

    def __init__(self, workers: int, thread_name_prefix: str) -> None:
        self._workers = max(1, workers)
        self._prefix = thread_name_prefix
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Task] = []
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._seq = itertools.count()
        self._shutdown = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Queue ``fn`` after every ranked task."""
        return self.submit_ranked(_last, fn, *args, **kwargs)

    def submit_ranked(
        self, rank: Callable[[], int], fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Future[T]:
        """Queue ``fn``; ``rank()`` (cheap, lock-free: it is called under the pool's lock)
        says how soon its result is needed, lower first."""
        future: Future[T] = Future()
        with self._cond:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.append(_Task(rank, next(self._seq), future, fn, args, kwargs))
            if self._idle > 0:
                self._idle -= 1  # that thread is this task's: counted out as it is woken
                self._cond.notify()
            elif len(self._threads) < self._workers:
                thread = threading.Thread(
                    target=self._work, name=f"{self._prefix}_{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _take(self) -> _Task | None:
        """The next task to run, waiting for one; None once shut down and drained."""
        with self._cond:
            while not self._queue:
                if self._shutdown:
                    return None
                self._idle += 1
                self._cond.wait()  # woken by a submit that counted it out, or by shutdown
            best = min(range(len(self._queue)), key=self._key)
            return self._queue.pop(best)

    def _key(self, i: int) -> tuple[int, int]:
        task = self._queue[i]
        if task.future.cancelled():
            return (-LAST, task.seq)  # out of the queue at once, without running
        try:
            return (task.rank(), task.seq)
        except Exception:  # a rank must never stop the pool
            return (LAST, task.seq)

    def _work(self) -> None:
        while (task := self._take()) is not None:
            if not task.future.set_running_or_notify_cancel():
                continue
            try:
                result = task.fn(*task.args, **task.kwargs)
            except BaseException as e:  # the task's caller sees it on the future
                task.future.set_exception(e)
            else:
                task.future.set_result(result)
            del task

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._shutdown = True
            self._idle = 0
            if cancel_futures:
                for task in self._queue:
                    task.future.cancel()
                self._queue.clear()
            self._cond.notify_all()
            threads = list(self._threads)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
