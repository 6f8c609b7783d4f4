"""The log cleaner service: worker threads, the choice of log, checkpoints, health.

Kafka's ``LogCleaner`` + ``LogCleanerManager``, owned by the ``LogManager``:

* ``log.cleaner.threads`` daemon threads, each with its own offset map (its share of
  ``log.cleaner.dedupe.buffer.size``) and one shared ``Throttler``; a thread that finds
  nothing to clean sleeps ``log.cleaner.backoff.ms`` (or until ``close``);
* each round takes the *filthiest* compacted log (highest dirty ratio among those that
  should be cleaned, see ``cleanable``) that no other thread is cleaning and that is not
  marked uncleanable, cleans it, and records the end offset in the log dir's
  ``cleaner-offset-checkpoint`` (Kafka's text format);
* a cleaning that fails on bad data (a corrupt batch, an unreadable file) marks the
  partition uncleanable and logs it; the broker keeps serving it, only cleaning stops;
* ``abort(tp)`` (topic deletion) waits until no thread is cleaning ``tp``.

Nothing here runs on the event loop: the swap takes the partition's lock only for renames.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tierlog.log.checkpoint import read_offsets_checkpoint, write_offsets_checkpoint
from tierlog.log.cleaner.cleanable import LogToClean, log_to_clean
from tierlog.log.cleaner.cleaner import Cleaner, CleanerStats, CleaningAborted
from tierlog.log.cleaner.config import CleanerConfig
from tierlog.log.cleaner.offset_map import OffsetMap
from tierlog.log.cleaner.throttler import Throttler
from tierlog.log.index import CorruptIndexError
from tierlog.log.names import CLEANER_OFFSET_CHECKPOINT, TopicPartition
from tierlog.log.partition_log import PartitionLog, wall_clock_ms
from tierlog.protocol.records import RecordsError

log = logging.getLogger(__name__)

LogsByDir = Callable[[], list[tuple[Path, PartitionLog]]]


@dataclass(frozen=True, slots=True)
class CleanerHealth:
    """What the metrics report (Kafka's ``LogCleaner`` gauges)."""

    max_dirty_percent: float
    recopy_percent: float
    time_since_last_run_ms: int
    uncleanable_partitions: int
    max_compaction_delay_ms: int
    max_clean_time_s: float
    dirty_ratios: dict[TopicPartition, float]
    """Each compacted log's cleanable ratio at the time of the call (Kafka logs it as the
    ``cleanable ratio`` of the log it picks); 0 for a log with nothing below its first
    uncleanable offset."""


class LogCleaner:
    def __init__(
        self, config: CleanerConfig, logs: LogsByDir, *, clock: Callable[[], int] = wall_clock_ms
    ) -> None:
        self.config = config
        self._logs = logs
        self._clock = clock
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._throttler = Throttler(config.io_max_bytes_per_second, self._stop)
        self._in_progress: set[TopicPartition] = set()
        self._aborting: set[TopicPartition] = set()
        self._uncleanable: set[TopicPartition] = set()
        self._threads: list[threading.Thread] = []
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._last_run_ms = clock()
        self._dirtiest_ratio = 0.0
        self._max_compaction_delay_ms = 0
        self._last_stats: list[CleanerStats] = []
        self._max_clean_time_s = 0.0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if not self.config.enable or self._threads:
            return
        for i in range(self.config.threads):
            t = threading.Thread(
                target=self._run, name=f"kafka-log-cleaner-thread-{i}", daemon=True
            )
            self._threads.append(t)
            t.start()

    def close(self) -> None:
        """Stop every thread; a cleaning in progress is abandoned before its swap."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        for t in self._threads:
            t.join()
        self._threads.clear()

    def reconfigure(self, config: CleanerConfig) -> None:
        """New thread count, offset-map memory, back-off or I/O rate, as Kafka applies a
        dynamic ``log.cleaner.*`` change: every thread stops (a cleaning in progress is
        abandoned before its swap and redone later), then the new threads start. Blocks until
        the old threads have ended, so call it off the event loop."""
        self.close()
        self.config = config
        self._stop = threading.Event()
        self._throttler = Throttler(config.io_max_bytes_per_second, self._stop)
        self.start()

    def _new_cleaner(self) -> Cleaner:
        omap = OffsetMap(self.config.map_memory_per_thread, self.config.io_buffer_load_factor)
        return Cleaner(omap, self._throttler, check_done=self._check_done)

    def _run(self) -> None:
        cleaner = self._new_cleaner()
        backoff = self.config.backoff_ms / 1000
        while not self._stop.is_set():
            try:
                cleaned = self.clean_once(cleaner)
            except Exception:
                log.exception("log cleaner round failed")
                cleaned = False
            if not cleaned:
                self._stop.wait(backoff)

    # -- one round -----------------------------------------------------------------------

    def clean_once(self, cleaner: Cleaner | None = None, now_ms: int | None = None) -> bool:
        """Clean the filthiest log, if any needs it (on the calling thread); True if one
        was cleaned."""
        now = self._clock() if now_ms is None else now_ms
        target = self._grab_filthiest(now)
        if target is None:
            return False
        worker = cleaner if cleaner is not None else self._new_cleaner()
        tp = target.tp
        started = time.monotonic()
        try:
            end, stats = worker.clean(target, now)
            self._update_checkpoint(target.log, tp, end)
            with self._lock:
                self._last_stats = [stats]
                self._max_clean_time_s = time.monotonic() - started
            log.info(
                "%s: cleaned up to %d: %d of %d bytes kept (%.1f%%), %d of %d messages",
                tp,
                end,
                stats.bytes_written,
                stats.bytes_read,
                stats.recopy_percent,
                stats.messages_written,
                stats.messages_read,
            )
        except CleaningAborted as exc:
            log.info("%s: cleaning aborted: %s", tp, exc)
        except (RecordsError, CorruptIndexError, OSError, OverflowError, ValueError) as exc:
            log.error("%s: marking the partition uncleanable: %s", tp, exc, exc_info=True)
            with self._lock:
                self._uncleanable.add(tp)
        finally:
            with self._lock:
                self._in_progress.discard(tp)
                self._aborting.discard(tp)
                self._lock.notify_all()
        return True

    def _grab_filthiest(self, now: int) -> LogToClean | None:
        with self._lock:
            self._last_run_ms = now
            candidates: list[LogToClean] = []
            max_delay = 0
            for log_dir, plog in self._logs():
                tp = plog.tp
                if (
                    not plog.config.compacted
                    or plog.closed
                    or tp in self._in_progress
                    or tp in self._uncleanable
                ):
                    continue
                try:
                    ltc = log_to_clean(tp, plog, self._checkpoint_of(log_dir).get(tp), now)
                except (OSError, ValueError, IndexError) as exc:
                    log.warning("%s: cannot compute what to clean: %s", tp, exc)
                    continue
                if ltc.reset_checkpoint:
                    self._update_checkpoint(plog, tp, ltc.first_dirty_offset)
                max_delay = max(max_delay, ltc.max_compaction_delay_ms)
                if ltc.total_bytes > 0:
                    candidates.append(ltc)
            self._max_compaction_delay_ms = max_delay
            self._dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            cleanable = [c for c in candidates if c.should_clean()]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._in_progress.add(filthiest.tp)
            return filthiest

    def _check_done(self, plog: PartitionLog) -> None:
        if self._stop.is_set():
            raise CleaningAborted("the cleaner is stopping")
        if plog.tp in self._aborting:
            raise CleaningAborted(f"{plog.tp}: cleaning aborted")

    # -- partitions ----------------------------------------------------------------------

    def abort(self, tp: TopicPartition) -> None:
        """Stop cleaning ``tp`` and wait until no thread is inside it (topic deletion);
        its uncleanable mark goes, and its checkpoint entry is removed from the file."""
        with self._lock:
            if tp in self._in_progress:
                self._aborting.add(tp)
                while tp in self._in_progress:
                    self._lock.wait(0.1)
            self._uncleanable.discard(tp)
            for log_dir, plog in self._logs():
                if plog.tp != tp:
                    continue
                entries = self._checkpoint_of(log_dir)
                if entries.pop(tp, None) is not None:
                    write_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)

    @property
    def uncleanable_partitions(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable)

    # -- checkpoints ---------------------------------------------------------------------

    def _checkpoint_of(self, log_dir: Path) -> dict[TopicPartition, int]:
        entries = self._checkpoints.get(log_dir)
        if entries is None:
            entries = read_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
            self._checkpoints[log_dir] = entries
        return entries

    def checkpointed_offset(self, tp: TopicPartition) -> int | None:
        with self._lock:
            for log_dir, plog in self._logs():
                if plog.tp == tp:
                    return self._checkpoint_of(log_dir).get(tp)
        return None

    def _update_checkpoint(self, plog: PartitionLog, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            pairs = self._logs()
            live = {p.tp for _, p in pairs}
            log_dir = next((d for d, p in pairs if p is plog), None)
            if log_dir is None:
                return
            entries = self._checkpoint_of(log_dir)
            entries[tp] = offset
            for stale in [t for t in entries if t not in live]:
                del entries[stale]
            write_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)

    # -- health --------------------------------------------------------------------------

    def _dirty_ratios_locked(self, now: int) -> dict[TopicPartition, float]:
        ratios: dict[TopicPartition, float] = {}
        for log_dir, plog in self._logs():
            if not plog.config.compacted or plog.closed:
                continue
            try:
                ltc = log_to_clean(plog.tp, plog, self._checkpoint_of(log_dir).get(plog.tp), now)
            except (OSError, ValueError, IndexError):
                continue
            ratios[plog.tp] = ltc.cleanable_ratio
        return ratios

    def health(self) -> CleanerHealth:
        with self._lock:
            stats = self._last_stats
            read = sum(s.bytes_read for s in stats)
            written = sum(s.bytes_written for s in stats)
            return CleanerHealth(
                max_dirty_percent=100.0 * self._dirtiest_ratio,
                recopy_percent=100.0 * written / read if read else 0.0,
                time_since_last_run_ms=max(self._clock() - self._last_run_ms, 0),
                uncleanable_partitions=len(self._uncleanable),
                max_compaction_delay_ms=self._max_compaction_delay_ms,
                max_clean_time_s=self._max_clean_time_s,
                dirty_ratios=self._dirty_ratios_locked(self._clock()),
            )
