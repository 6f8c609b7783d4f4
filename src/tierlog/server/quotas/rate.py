"""Kafka's windowed rate (``SampledStat`` + ``Rate``) and the throttle time it implies.

A rate keeps at most ``quota.window.num`` samples, each covering ``quota.window.size.seconds``
from its first event. The rate is the sum of the live samples over the time since the
oldest one began, but never over less than ``num - 1`` whole windows: a client's first
bytes are divided by ten seconds with Kafka's defaults, which is the burst a quota allows.
A sample older than ``num`` windows is dropped.

When a recorded value takes the rate above the bound, the client is throttled for the time
that brings the rate back to the bound if it sent nothing more, Kafka's ``QuotaUtils``:
``(rate - bound) / bound * window``. Recording is a few float operations on a deque: no
allocation unless a new sample starts.
"""

from __future__ import annotations

import collections


class WindowedRate:
    __slots__ = ("_num", "_samples", "_window_ms", "last_ms")

    def __init__(self, num_samples: int, window_ms: int) -> None:
        # each sample is [start ms, sum]
        self._samples: collections.deque[list[float]] = collections.deque()
        self._window_ms = window_ms
        self._num = num_samples
        self.last_ms = 0.0

    def record(self, value: float, now_ms: float) -> None:
        samples = self._samples
        if not samples or now_ms - samples[-1][0] >= self._window_ms:
            samples.append([now_ms, 0.0])
            if len(samples) > self._num:
                samples.popleft()
        samples[-1][1] += value
        self.last_ms = now_ms

    def measure(self, now_ms: float) -> tuple[float, float]:
        """(rate per second, the window in ms it was measured over)."""
        samples = self._samples
        expire = self._num * self._window_ms
        while samples and now_ms - samples[0][0] >= expire:
            samples.popleft()
        total = 0.0
        for s in samples:
            total += s[1]
        elapsed = now_ms - samples[0][0] if samples else 0.0
        full = int(elapsed // self._window_ms)
        if full < self._num - 1:
            elapsed += (self._num - 1 - full) * self._window_ms
        window = max(elapsed, 1.0)
        return total * 1000.0 / window, window

    def throttle_ms(self, bound: float, now_ms: float) -> int:
        """How long to throttle now that the rate may be above ``bound`` (0: it is not)."""
        rate, window = self.measure(now_ms)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * window)

    @property
    def empty(self) -> bool:
        return not self._samples
