"""``log.cleaner.io.max.bytes.per.second``: one I/O budget shared by every cleaner thread.

As Kafka's ``Throttler``: the bytes read and written are counted, and every
``check_interval_s`` the observed rate is compared with the target; above it, the caller
sleeps until the average falls back to the target. Sleeping waits on the cleaner's stop event,
so closing the broker never waits out a throttle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

UNLIMITED = 1.7976931348623157e308


class Throttler:
    def __init__(
        self,
        bytes_per_second: float,
        stop: threading.Event,
        *,
        check_interval_s: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = bytes_per_second
        self._stop = stop
        self._interval = check_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        self.throttled_s = 0.0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.rate >= UNLIMITED:
            return
        with self._lock:
            self._observed += nbytes
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed < self._interval:
                return
            wait = self._observed / self.rate - elapsed
            self._period_start = now
            self._observed = 0.0
        if wait > 0:
            self.throttled_s += wait
            self._stop.wait(wait)
            with self._lock:
                self._period_start = self._clock()
