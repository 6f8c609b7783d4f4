"""Which part of a compacted log may be cleaned now, and how dirty it is.

Kafka's ``LogCleanerManager.cleanableOffsets`` and ``LogToClean``:

* the *first dirty offset* is the ``cleaner-offset-checkpoint`` entry, or the log start
  offset when there is none or it lies outside ``[log start, log end]``;
* the *first uncleanable offset* is the lowest of the last stable offset, the active
  segment's base offset and, with ``min.compaction.lag.ms`` > 0, the base offset of the
  first dirty segment holding a record newer than the lag; cleaning stops there, so no
  record newer than the lag and nothing in the active segment is ever rewritten;
* the *dirty ratio* is the cleanable bytes over all bytes up to the uncleanable offset; a
  log is cleaned when it exceeds ``min.cleanable.dirty.ratio``, or when some dirty segment's
  first batch is older than ``max.compaction.lag.ms`` and there is something to clean.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tierlog.log.config import LONG_MAX
from tierlog.log.names import TopicPartition
from tierlog.log.partition_log import PartitionLog, SegmentInfo
from tierlog.protocol.records import LOG_OVERHEAD, RECORDS_OFFSET, RecordsError, read_header


@dataclass(frozen=True, slots=True)
class LogToClean:
    tp: TopicPartition
    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int
    reset_checkpoint: bool
    """The checkpoint was missing or out of range and should be rewritten."""

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def need_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0

    def should_clean(self) -> bool:
        if self.need_compaction_now and self.cleanable_bytes > 0:
            return True
        return self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio


def first_batch_timestamp(info: SegmentInfo) -> int:
    """The max timestamp of a segment's first batch (Kafka's rolling-based timestamp), or
    LONG_MAX for an empty or unreadable segment."""
    try:
        fd = os.open(info.log_path, os.O_RDONLY)
    except FileNotFoundError:
        return LONG_MAX
    try:
        head = os.pread(fd, RECORDS_OFFSET, 0)
    finally:
        os.close(fd)
    if len(head) < RECORDS_OFFSET:
        return LONG_MAX
    try:
        h = read_header(head, 0)
    except (RecordsError, ValueError):
        return LONG_MAX
    if h.batch_length + LOG_OVERHEAD < RECORDS_OFFSET:
        return LONG_MAX
    return h.max_timestamp


def _overlapping(infos: list[SegmentInfo], start: int, end: int) -> list[SegmentInfo]:
    """Segments holding any offset of ``[start, end)`` (Kafka's ``logSegments(from, to)``)."""
    return [i for i in infos if i.base_offset < end and i.next_offset > start]


def log_to_clean(
    tp: TopicPartition, plog: PartitionLog, checkpoint: int | None, now_ms: int
) -> LogToClean:
    infos = plog.segments()
    active = infos[-1]
    sealed = infos[:-1]
    log_start = plog.log_start_offset
    leo = plog.log_end_offset
    reset = False
    if checkpoint is None or checkpoint < log_start or checkpoint > leo:
        reset = checkpoint is not None
        first_dirty = log_start
    else:
        first_dirty = checkpoint
    uncleanable = min(plog.last_stable_offset, active.base_offset)
    cfg = plog.config
    dirty_sealed = [i for i in sealed if i.next_offset > first_dirty]
    if cfg.min_compaction_lag_ms > 0:
        horizon = now_ms - cfg.min_compaction_lag_ms
        for info in dirty_sealed:
            if info.largest_timestamp > horizon:
                uncleanable = min(uncleanable, info.base_offset)
                break
    first_dirty = min(first_dirty, uncleanable)
    delay = 0
    if cfg.max_compaction_lag_ms < LONG_MAX:
        stamps = [t for i in dirty_sealed if (t := first_batch_timestamp(i)) > 0]
        earliest = min(stamps, default=LONG_MAX)
        clean_until = now_ms - cfg.max_compaction_lag_ms
        if earliest < clean_until:
            delay = clean_until - earliest
    # cleaning stops at a segment boundary: the segment holding the uncleanable offset
    first_uncleanable_segment = next((i for i in sealed if i.next_offset > uncleanable), active)
    bound = first_uncleanable_segment.base_offset
    clean = sum(i.size for i in _overlapping(infos, -1, first_dirty))
    cleanable = sum(i.size for i in _overlapping(infos, min(first_dirty, bound), bound))
    return LogToClean(
        tp,
        plog,
        first_dirty,
        bound,
        clean,
        cleanable,
        delay,
        reset,
    )
