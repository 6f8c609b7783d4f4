"""Kafka's ``SimpleRate`` sampled meter, shared by the broker-wide byte quotas.

The remote-tier quotas (KIP-956, ``tiered.manager.quota``) and the replication throttles
(KIP-73, ``replication.quota``) measure a byte rate the way Kafka's ``SimpleRate`` sensor
does: ``num_windows`` samples, each covering ``window_ms`` from its first event, the rate
being the bytes of the live samples over ``max(now - oldest sample start, one window)``.
A sample older than ``num_windows`` windows is reset to start now, empty, as Kafka's
``SampledStat`` purges it. The client quotas use Kafka's other flavour, ``Rate`` (a
minimum of ``num - 1`` windows), in ``server.quotas.rate``.

It sits below every layer that meters (stdlib only) so that neither of them imports the
other. Not thread-safe: each owner holds its own lock around it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SimpleRate"]


@dataclass
class _Sample:
    start_ms: int
    value: float = 0.0


class SimpleRate:
    __slots__ = ("_current", "_num_windows", "_samples", "window_ms")

    def __init__(self, num_windows: int, window_ms: int) -> None:
        self._num_windows = num_windows
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
            self._current = 0
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self._num_windows
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current] = _Sample(now_ms)
            sample = self._samples[self._current]
        sample.value += value

    def measure(self, now_ms: int) -> tuple[float, int]:
        """(rate per second, the span in ms it was measured over)."""
        expire_ms = self._num_windows * self.window_ms
        for i, s in enumerate(self._samples):
            if now_ms - s.start_ms >= expire_ms:
                self._samples[i] = _Sample(now_ms)
        total = sum(s.value for s in self._samples)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        span = max(now_ms - oldest, self.window_ms)
        return total / (span / 1000.0), span
