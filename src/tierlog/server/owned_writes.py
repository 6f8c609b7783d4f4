"""Coordinator writes that outlive the request that asked for them.

A connection that closes cancels the request it was serving (``connection.py``). A coordinator
write cannot stop half-way: its record goes on landing in the log from its worker thread or
its replicas, and the coordinator's memory must follow the log, or it answers from a state no
reload would give (an id left pending for ever, a transactional offset the log holds and the
cache forgot). So the write and what is applied after it run in a task that the coordinator
owns, and the request only awaits it through ``asyncio.shield``. Kafka behaves the same: an
append's callback completes whether or not anyone still waits for the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class OwnedWrites:
    """The writes in flight of one coordinator, which awaits them when it closes."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self, write: Coroutine[Any, Any, T]) -> T:
        """Run ``write`` to its end even if the caller is cancelled meanwhile."""
        task = asyncio.get_running_loop().create_task(write)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(task)

    async def close(self, *, cancel: bool) -> None:
        """Wait for every write in flight; with ``cancel``, stop them first (their answers go
        to nobody, and the next owner reloads whatever reached the log)."""
        tasks = list(self._tasks)
        if cancel:
            for t in tasks:
                t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
