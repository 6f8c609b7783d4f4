"""Exponential back-off between failed copy runs of one partition.

Kafka defines ``remote.log.manager.task.retry.backoff.ms`` / ``.max.ms`` / ``.jitter`` but
its copy task simply runs again at the next fixed-delay tick. During a long store outage
that is one failed upload (and one stack trace) per partition per tick. Here a failed run
pushes the partition's next attempt out by ``initial * 2^(failures - 1)``, capped at the
maximum and spread by the jitter (Kafka's ``ExponentialBackoff`` formula), so 1,000
partitions do not retry in lockstep against a recovering store. Ticks that fall inside the
back-off do nothing; the first success resets it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["RetryBackoff"]


@dataclass
class RetryBackoff:
    initial_ms: int
    max_ms: int
    jitter: float
    rand: Callable[[], float] = field(default=random.random, repr=False)
    failures: int = 0
    not_before_ms: int = 0

    def ready(self, now_ms: int) -> bool:
        return now_ms >= self.not_before_ms

    def failed(self, now_ms: int) -> int:
        """Record a failure at ``now_ms``; returns the delay before the next attempt."""
        self.failures += 1
        term = min(self.max_ms, self.initial_ms * 2 ** min(self.failures - 1, 62))
        factor = 1.0 + self.jitter * (2.0 * self.rand() - 1.0)
        delay = int(term * factor)
        self.not_before_ms = now_ms + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before_ms = 0
