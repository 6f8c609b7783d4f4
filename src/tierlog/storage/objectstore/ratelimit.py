"""A token bucket shared by every upload of one plugin instance (i.e. per broker).

Callers take what they need and, if that drives the bucket negative, sleep off the debt.
Concurrent uploads therefore share the rate instead of each getting it, and a chunk larger
than the burst still goes through (it just waits longer), so the limit holds whatever the
chunk size.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self,
        rate_bytes_per_second: int,
        *,
        burst_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_bytes_per_second <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate_bytes_per_second)
        self.capacity = float(burst_bytes if burst_bytes is not None else rate_bytes_per_second)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = self.capacity
        self._stamp = clock()

    def acquire(self, amount: int) -> float:
        """Take ``amount`` tokens, sleeping as long as needed; returns the time slept."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= amount
            debt = -self._tokens
        if debt <= 0:
            return 0.0
        wait = debt / self.rate
        self._sleep(wait)
        return wait
