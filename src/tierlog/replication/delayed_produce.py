"""Where acks=all appends wait for the ISR (Kafka's ``DelayedProduce`` in the produce
purgatory; spec/kafka-replication.md L-7).

Each waiting partition append is keyed by its partition and the offset the HW must reach
(its last offset + 1). ``check`` re-evaluates a partition's waiters whenever its HW, ISR or
leadership changes, with the outcome the ``Partition`` decides (NONE,
NOT_ENOUGH_REPLICAS_AFTER_APPEND or NOT_LEADER_OR_FOLLOWER); a waiter still pending at the
request's timeout answers REQUEST_TIMED_OUT. Completion is by HW, never by counting acks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tierlog.protocol.errors import ErrorCode

Key = tuple[str, int]


class DelayedProduces:
    def __init__(self) -> None:
        self._waiters: dict[Key, list[tuple[int, asyncio.Future[ErrorCode]]]] = {}

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    async def wait(self, key: Key, required_offset: int, timeout_s: float) -> ErrorCode:
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        entry = (required_offset, fut)
        self._waiters.setdefault(key, []).append(entry)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), max(timeout_s, 0.0))
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None and entry in waiters:
                waiters.remove(entry)
                if not waiters:
                    del self._waiters[key]

    def check(self, key: Key, outcome: Callable[[int], ErrorCode | None]) -> None:
        """Complete the waiters of ``key`` whose ``outcome(required_offset)`` is decided."""
        for required, fut in list(self._waiters.get(key, ())):
            if fut.done():
                continue
            code = outcome(required)
            if code is not None:
                fut.set_result(code)

    def fail_all(self, code: ErrorCode) -> None:
        for waiters in self._waiters.values():
            for _, fut in waiters:
                if not fut.done():
                    fut.set_result(code)
