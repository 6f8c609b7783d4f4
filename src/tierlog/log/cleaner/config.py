"""The cleaner's broker-level settings (Kafka's ``log.cleaner.*`` keys and defaults).

The per-topic rules (``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``,
``max.compaction.lag.ms``, ``delete.retention.ms``) live in ``LogConfig`` with the other
topic keys; these are the ones that size and pace the cleaner threads themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from tierlog.log.cleaner.throttler import UNLIMITED


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    enable: bool = True
    """``log.cleaner.enable``: with false no cleaner thread runs."""
    threads: int = 1
    """``log.cleaner.threads``."""
    backoff_ms: int = 15_000
    """``log.cleaner.backoff.ms``: a thread's sleep when no log needs cleaning."""
    dedupe_buffer_size: int = 128 * 1024 * 1024
    """``log.cleaner.dedupe.buffer.size``: offset-map memory, shared by all threads."""
    io_buffer_load_factor: float = 0.9
    """``log.cleaner.io.buffer.load.factor``: how full an offset map may get."""
    io_max_bytes_per_second: float = UNLIMITED
    """``log.cleaner.io.max.bytes.per.second``: read + write rate of all threads together."""

    @property
    def map_memory_per_thread(self) -> int:
        """Kafka's split: each thread's share, capped at what a Java array could hold."""
        return min(self.dedupe_buffer_size // max(self.threads, 1), 2**31 - 1)
