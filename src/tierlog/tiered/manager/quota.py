"""Broker-wide byte-rate quotas for remote copy and remote fetch (KIP-956).

The arithmetic mirrors Kafka's ``SimpleRate`` sensor so that operators get the throttle
times they expect from Kafka: the rate is the sum of the live samples divided by
``max(now - oldest sample start, window)``, and the throttle is
``(rate - quota) / quota * that same window``. Copy applies it as back-pressure (the copier
thread waits), fetch applies it by shedding the read; both policies live in the manager,
this module only measures.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tierlog.simple_rate import SimpleRate

__all__ = ["ByteRateQuota", "QuotaConfig", "wall_clock_ms"]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class QuotaConfig:
    bytes_per_second: float
    num_windows: int = 11
    window_size_seconds: int = 1

    def __post_init__(self) -> None:
        if self.bytes_per_second <= 0:
            raise ValueError("quota must be positive")
        if self.num_windows < 1 or self.window_size_seconds < 1:
            raise ValueError("quota windows must be >= 1")


class ByteRateQuota:
    """A sampled byte-rate meter with Kafka's throttle formula; safe to share between threads."""

    def __init__(self, config: QuotaConfig, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._config = config
        self._clock = clock_ms
        self._lock = threading.Lock()
        self._meter = SimpleRate(config.num_windows, config.window_size_seconds * 1000)

    @property
    def bytes_per_second(self) -> float:
        return self._config.bytes_per_second

    def update_quota(self, bytes_per_second: float) -> None:
        """Only the bound changes; recorded samples are kept so the rate stays continuous."""
        with self._lock:
            self._config = QuotaConfig(
                bytes_per_second, self._config.num_windows, self._config.window_size_seconds
            )

    def record(self, nbytes: float) -> None:
        now = self._clock()
        with self._lock:
            self._meter.record(nbytes, now)

    def throttle_time_ms(self) -> int:
        """Milliseconds the caller should stay away for the rate to fall back to the quota."""
        now = self._clock()
        with self._lock:
            rate, window_ms = self._meter.measure(now)
            bound = self._config.bytes_per_second
            if rate <= bound:
                return 0
            return math.floor((rate - bound) / bound * window_ms + 0.5)

    def rate(self) -> float:
        now = self._clock()
        with self._lock:
            return self._meter.measure(now)[0]
