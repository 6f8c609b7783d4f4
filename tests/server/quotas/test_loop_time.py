"""``LoopTimer`` charges a handler the time it runs on the loop, not the time it awaits, and
passes results, exceptions and cancellation through as a direct await would."""

from __future__ import annotations

import asyncio
import time

import pytest

from tierlog.server.quotas.loop_time import LoopTimer


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _handler() -> str:
    """20 ms on the loop, a 200 ms wait off it (the await the timer must not charge), then
    20 ms more."""
    _spin(0.02)
    await asyncio.sleep(0.2)
    _spin(0.02)
    return "done"


def test_only_the_time_on_the_loop_is_charged() -> None:
    async def main() -> tuple[str, float]:
        timer = LoopTimer()
        result = await timer.run(_handler())
        return result, timer.elapsed()

    result, elapsed = asyncio.run(main())
    assert result == "done"
    assert 0.04 <= elapsed < 0.15


def test_exceptions_and_cancellation_pass_through() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def caught_cancel(seen: list[str], waiting: asyncio.Event) -> None:
        try:
            waiting.set()
            await asyncio.Event().wait()  # the await a cancellation interrupts
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> list[str]:
        with pytest.raises(ValueError, match="boom"):
            await LoopTimer().run(failing())
        seen: list[str] = []
        waiting = asyncio.Event()
        task = asyncio.ensure_future(LoopTimer().run(caught_cancel(seen, waiting)))
        await waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    assert asyncio.run(main()) == ["cancelled"]
