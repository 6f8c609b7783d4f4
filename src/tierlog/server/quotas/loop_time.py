"""How long a request's handler runs on the event loop: the measure of ``request_percentage``.

Kafka's request quota (KIP-124) charges a client for the time request-handler and network
threads spend on its requests. tierlog has one event loop instead of thread pools, so a
request is charged the time its handler coroutine *runs* on the loop: each step between two
awaits is timed, and the time it spends waiting (for the purgatory, an fsync, replicas,
a remote read) is not, since the loop serves others meanwhile. Work a handler hands to
threads (the flush pool, remote reads) is not charged either: those pools are shared and
bounded on their own, and what a request costs there cannot be told apart from waiting.

``LoopTimer.run`` drives the handler's coroutine itself, passing every future it awaits up
to the task and every result or exception (cancellation too) back down, so the handler
behaves exactly as if awaited directly; it costs two clock reads per step.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LoopTimer:
    __slots__ = ("_spent", "_step_started")

    def __init__(self) -> None:
        self._spent = 0.0
        self._step_started: float | None = None

    def elapsed(self) -> float:
        """Seconds the handler has run on the loop so far (the current step included)."""
        started = self._step_started
        running = time.perf_counter() - started if started is not None else 0.0
        return self._spent + running

    async def run(self, handler: Awaitable[T]) -> T:
        return await _Timed(handler, self)


class _Timed(Generic[T]):
    __slots__ = ("_handler", "_timer")

    def __init__(self, handler: Awaitable[T], timer: LoopTimer) -> None:
        self._handler = handler
        self._timer = timer

    def __await__(self) -> Generator[Any, Any, T]:
        coro, timer = self._handler.__await__(), self._timer
        value: Any = None
        error: BaseException | None = None
        while True:
            timer._step_started = time.perf_counter()
            try:
                if error is not None:
                    thrown, error = error, None
                    awaited = coro.throw(thrown)
                else:
                    awaited = coro.send(value)
            except StopIteration as done:
                result: T = done.value
                return result
            finally:
                timer._spent += time.perf_counter() - timer._step_started
                timer._step_started = None
            try:
                value = yield awaited
            except BaseException as e:  # handed to the handler, as a direct await would
                error = e
                value = None
