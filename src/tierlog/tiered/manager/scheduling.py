"""Thread pools of the RemoteLogManager and the fixed-delay scheduler that feeds them.

RSM and RLMM calls block, so they never run on the asyncio loop. Bounds:

* copier / expiration / follower pools (``remote.log.manager.*.thread.pool.size``): one
  periodic task per partition and kind. A task is re-armed only after its run finishes
  (fixed delay), so each pool's queue holds at most one entry per partition; when every
  thread is busy, due runs wait in that queue, they are never dropped.
* reader pool (``remote.log.reader.threads`` threads, ``remote.log.reader.max.pending.tasks``
  waiting): ``BoundedExecutor.submit`` refuses work beyond threads + pending with
  ``RejectedExecution`` instead of queueing without limit; the caller turns that into an
  error for that one partition.

A single daemon timer thread (``rlm-scheduler``) sleeps until the next due task and hands it
to its pool; it never runs task code itself.
"""

from __future__ import annotations

import abc
import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["BoundedExecutor", "PeriodicTask", "RejectedExecution", "TaskScheduler"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class RejectedExecution(RuntimeError):
    """The pool and its queue are full."""


class BoundedExecutor:
    def __init__(self, threads: int, max_pending: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
        self._slots = threading.BoundedSemaphore(threads + max_pending)
        self.capacity = threads + max_pending
        self._in_use = 0
        self._count_lock = threading.Lock()

    @property
    def in_use(self) -> int:
        """Tasks running or queued."""
        with self._count_lock:
            return self._in_use

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        if not self._slots.acquire(blocking=False):
            raise RejectedExecution("remote reader queue is full")
        with self._count_lock:
            self._in_use += 1
        try:
            fut = self._pool.submit(fn, *args)
        except BaseException:
            self._release(None)
            raise
        fut.add_done_callback(self._release)
        return fut

    def _release(self, _f: object) -> None:
        with self._count_lock:
            self._in_use -= 1
        self._slots.release()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class PeriodicTask(abc.ABC):
    """One partition's task of one kind; ``cancel`` stops re-arming and is seen by
    ``execute``, which checks ``is_cancelled`` between its steps."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cancelled = threading.Event()
        self.runs = 0
        self.idle = threading.Event()
        self.idle.set()
        self.after: PeriodicTask | None = None
        """The task this one replaced (a leadership change): its runs wait until that
        task's run in flight is over, so two tasks of a partition never overlap."""

    def cancel(self) -> None:
        self.cancelled.set()

    def is_cancelled(self) -> bool:
        return self.cancelled.is_set()

    @abc.abstractmethod
    def execute(self) -> None:
        """One run of the task body, on a pool thread."""

    def run_once(self) -> None:
        if self.is_cancelled():
            return
        if self.after is not None:
            if not self.after.idle.is_set():
                return
            self.after = None
        self.idle.clear()
        try:
            self.execute()
        except Exception:
            log.exception("remote log task %s failed", self.name)
        finally:
            self.runs += 1
            self.idle.set()


class TaskScheduler:
    def __init__(self, interval_ms: int) -> None:
        self.interval_s = interval_ms / 1000.0
        self._heap: list[tuple[float, int, PeriodicTask, ThreadPoolExecutor]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="rlm-scheduler", daemon=True)
        self._thread.start()

    def schedule(self, task: PeriodicTask, pool: ThreadPoolExecutor, delay_s: float = 0.0) -> None:
        with self._cv:
            if self._closed or task.is_cancelled():
                return
            heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._seq), task, pool))
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cv.wait(timeout)
                if self._closed:
                    return
                _due, _seq, task, pool = heapq.heappop(self._heap)
            if task.is_cancelled():
                continue
            try:
                fut = pool.submit(task.run_once)
            except RuntimeError:
                return  # pool shut down
            fut.add_done_callback(functools.partial(self._rearm, task, pool))

    def _rearm(self, task: PeriodicTask, pool: ThreadPoolExecutor, _f: Future[None]) -> None:
        self.schedule(task, pool, self.interval_s)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._heap.clear()
            self._cv.notify_all()
        self._thread.join(timeout=5)
