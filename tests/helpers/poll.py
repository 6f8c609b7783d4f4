"""Polling with a deadline: the only way tests wait for something (no bare sleeps)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | None],
    timeout_s: float = 30.0,
    interval_s: float = 0.02,
    what: str = "",
) -> T:
    """Call ``predicate`` until it returns a truthy value; return it, or fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    last = predicate()
    while not last:
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what or predicate}")
        time.sleep(interval_s)
        last = predicate()
    return last


async def wait_until_async(
    predicate: Callable[[], T | None], timeout_s: float = 30.0, interval_s: float = 0.01
) -> T:
    """``wait_until`` inside an event loop: the loop keeps running between the looks."""
    deadline = time.monotonic() + timeout_s
    last = predicate()
    while not last:
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {predicate}")
        await asyncio.sleep(interval_s)
        last = predicate()
    return last


def holds_for(
    predicate: Callable[[], object], seconds: float, what: str, interval_s: float = 0.05
) -> None:
    """The negative twin of ``wait_until``: ``predicate`` must hold at every look for
    ``seconds`` (e.g. "nothing was uploaded while copy is disabled")."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), what
        time.sleep(interval_s)
