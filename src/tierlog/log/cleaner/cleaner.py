"""Cleaning one compacted log: Kafka's ``Cleaner.doClean``.

1. Build the offset map over the dirty section ``[first dirty, first uncleanable)``, stopping
   at the batch that would overfill it; the map's ``latest_offset`` + 1 is where this pass
   ends (the rest waits for the next pass).
2. Group the sealed segments below that end (from the log start: earlier cleanings are
   revisited, so tombstones whose delete horizon passed go) into groups whose log bytes fit
   ``segment.bytes``, whose index bytes fit ``segment.index.bytes`` and whose offsets fit a
   relative index entry.
3. Filter each group into one ``.cleaned`` segment and swap it in (``cleaned_segment``,
   ``swap``, ``PartitionLog.replace_segments``).

A record is kept if it lies past the map, or it is the latest for its key and it is not a
tombstone whose batch's delete horizon has passed. Keyless records below the map are dropped,
as Kafka does (a compacted topic cannot hold them). The first cleaning that keeps a tombstone
sets its batch's delete horizon to now + ``delete.retention.ms``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tierlog.log.cleaner.cleanable import LogToClean
from tierlog.log.cleaner.cleaned_segment import CleanedSegmentWriter, cleaned_paths
from tierlog.log.cleaner.offset_map import OffsetMap
from tierlog.log.cleaner.rebatch import (
    RecordSpan,
    build_empty,
    build_retained,
    delete_horizon,
    scan_records,
)
from tierlog.log.cleaner.throttler import Throttler
from tierlog.log.cleaner.transactions import BatchAction, TransactionPolicy
from tierlog.log.config import LONG_MAX
from tierlog.log.partition_log import PartitionLog, SegmentInfo
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import LOG_OVERHEAD, BatchHeader, RecordsError, check_batch

log = logging.getLogger(__name__)

_MAX_RELATIVE = 2**31 - 1
_READ_CHUNK = 512 * 1024


class CleaningAborted(Exception):
    """The log changed under the cleaner (deleted, closed, segments removed) or the
    cleaner is stopping; nothing was swapped for the group in progress."""


@dataclass(slots=True)
class CleanerStats:
    """Kafka's ``CleanerStats`` for one cleaning."""

    start_s: float = field(default_factory=time.monotonic)
    end_s: float = 0.0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0

    @property
    def recopy_percent(self) -> float:
        return 100.0 * self.bytes_written / self.bytes_read if self.bytes_read else 0.0


def iter_segment_batches(
    path: Path, throttler: Throttler | None, check: Callable[[], None]
) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a segment file, CRC-checked, each as its own bytes (header at 0).

    Raises RecordsError on a corrupt or torn batch (the partition becomes uncleanable) and
    CleaningAborted if the file disappeared (retention or deletion removed it) or shrank
    under the reader (a replica truncated below its HW, where Kafka pauses the cleaner).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError as exc:
        raise CleaningAborted(f"{path} is gone") from exc
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            check()
            chunk = os.pread(fd, min(_READ_CHUNK, size - pos), pos)
            if len(chunk) >= LOG_OVERHEAD:
                first = int.from_bytes(chunk[8:12], "big", signed=True) + LOG_OVERHEAD
                if len(chunk) < first <= size - pos:
                    chunk = os.pread(fd, first, pos)
            if throttler is not None:
                throttler.maybe_throttle(len(chunk))
            off = 0
            while off < len(chunk):
                if off > 0:
                    if len(chunk) - off < LOG_OVERHEAD:
                        break
                    n = int.from_bytes(chunk[off + 8 : off + 12], "big", signed=True)
                    if off + n + LOG_OVERHEAD > len(chunk) and pos + off + n + LOG_OVERHEAD <= size:
                        break
                try:
                    h = check_batch(chunk, off, len(chunk), verify_crc=True)
                except RecordsError as exc:
                    _raise_if_shrunk(fd, size, path)
                    exc.position = pos + off
                    raise
                yield h._replace(position=0), chunk[off : off + h.size]
                off += h.size
            if off == 0:
                _raise_if_shrunk(fd, size, path)
                raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"{path}: no batch at {pos}", pos)
            pos += off
    finally:
        os.close(fd)


def _raise_if_shrunk(fd: int, size: int, path: Path) -> None:
    if os.fstat(fd).st_size < size:
        raise CleaningAborted(f"{path} was truncated while it was read")


def group_segments_by_size(
    segments: list[SegmentInfo], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[SegmentInfo]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments merged while the sums fit."""

    def index_sizes(info: SegmentInfo) -> tuple[int, int]:
        try:
            return os.path.getsize(info.offset_index_path), os.path.getsize(info.time_index_path)
        except FileNotFoundError:
            return 0, 0

    groups: list[list[SegmentInfo]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        idx, tidx = index_sizes(segments[i])
        i += 1
        while i < len(segments):
            nxt = segments[i]
            n_idx, n_tidx = index_sizes(nxt)
            last = (
                segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable - 1
            )
            if (
                log_size + nxt.size > max_size
                or idx + n_idx > max_index_size
                or tidx + n_tidx > max_index_size
                or last - group[0].base_offset > _MAX_RELATIVE
            ):
                break
            group.append(nxt)
            log_size += nxt.size
            idx += n_idx
            tidx += n_tidx
            i += 1
        groups.append(group)
    return groups


class Cleaner:
    """One cleaner thread's worker: its offset map and the logic of one cleaning."""

    def __init__(
        self,
        offset_map: OffsetMap,
        throttler: Throttler | None = None,
        *,
        check_done: Callable[[PartitionLog], None] | None = None,
    ) -> None:
        self.offset_map = offset_map
        self.throttler = throttler
        self._check_done = check_done

    def _check(self, plog: PartitionLog) -> None:
        if plog.closed:
            raise CleaningAborted(f"{plog.tp} was closed")
        if self._check_done is not None:
            self._check_done(plog)

    def clean(self, target: LogToClean, now_ms: int) -> tuple[int, CleanerStats]:
        """Clean one log; returns the offset the next cleaning starts from."""
        plog = target.log
        stats = CleanerStats()
        infos = plog.segments()
        sealed = [i for i in infos if not i.is_active]
        mapped, _ = plog.collect_aborted_txns(
            target.first_dirty_offset, target.first_uncleanable_offset
        )
        self._build_offset_map(plog, sealed, target, TransactionPolicy(mapped), stats)
        end = self.offset_map.latest_offset + 1
        if end <= target.first_dirty_offset:
            # no batch at or above the first dirty offset before the uncleanable one: the
            # range holds nothing to clean (its records were removed by earlier cleanings)
            return target.first_uncleanable_offset, stats
        log.info(
            "%s: cleaning [%d, %d) (dirty from %d), %d keys mapped",
            plog.tp,
            plog.log_start_offset,
            end,
            target.first_dirty_offset,
            self.offset_map.size,
        )
        producers = plog.active_producer_last_offsets()
        cfg = plog.config
        to_clean = [i for i in sealed if i.base_offset < end]
        policy = TransactionPolicy()
        for group in group_segments_by_size(
            to_clean, cfg.segment_bytes, cfg.segment_index_bytes, target.first_uncleanable_offset
        ):
            self._clean_group(plog, group, policy, producers, now_ms, stats)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_s = time.monotonic()
        return end, stats

    # -- the offset map ------------------------------------------------------------------

    def _build_offset_map(
        self,
        plog: PartitionLog,
        sealed: list[SegmentInfo],
        target: LogToClean,
        policy: TransactionPolicy,
        stats: CleanerStats,
    ) -> None:
        omap = self.offset_map
        omap.clear()
        start = target.first_dirty_offset
        stop = target.first_uncleanable_offset
        for info in sealed:
            if info.next_offset <= start or info.base_offset >= stop:
                continue
            for h, data in iter_segment_batches(
                info.log_path, self.throttler, lambda: self._check(plog)
            ):
                if h.base_offset >= stop:
                    return
                stats.map_bytes_read += h.size
                if h.last_offset < start:
                    continue
                if policy.on_batch(h, data) is BatchAction.FILTER:
                    base = h.base_offset
                    spans = scan_records(data, h)[1]
                    keyed = [
                        (key, base + delta)
                        for delta, _ts, _attrs, key, _value, _start, _end in spans
                        if key is not None and base + delta >= start
                    ]
                    if omap.is_full(len(keyed)):
                        new_keys = len({key for key, _ in keyed})
                        if omap.is_full(new_keys) and omap.size > 0:
                            return  # this pass ends before the batch; the next starts at it
                        if new_keys >= omap.slots:
                            raise OverflowError(
                                f"{plog.tp}: batch at offset {h.base_offset} holds more keys "
                                f"than the offset map has slots ({omap.slots}); raise "
                                "log.cleaner.dedupe.buffer.size"
                            )
                    put = omap.put
                    for key, offset in keyed:
                        put(key, offset)
                    stats.map_messages_read += h.records_count
                omap.latest_offset = h.last_offset

    # -- filtering -----------------------------------------------------------------------

    def _clean_group(
        self,
        plog: PartitionLog,
        group: list[SegmentInfo],
        policy: TransactionPolicy,
        producers: dict[int, int],
        now_ms: int,
        stats: CleanerStats,
    ) -> None:
        cfg = plog.config
        base = group[0].base_offset
        writer = CleanedSegmentWriter(
            plog.dir,
            base,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
        )
        marked = len(policy.cleaned_index)
        try:
            for info in group:
                policy.add_aborted(plog.collect_aborted_txns(info.base_offset, info.next_offset)[0])
                for h, data in iter_segment_batches(
                    info.log_path, self.throttler, lambda: self._check(plog)
                ):
                    out = self._filter_batch(
                        h, data, policy, producers, now_ms, cfg.delete_retention_ms, stats
                    )
                    stats.bytes_read += h.size
                    stats.messages_read += h.records_count
                    if out is None:
                        continue
                    out_header, out_data = out
                    writer.append(out_data, out_header)
                    stats.bytes_written += len(out_data)
                    stats.messages_written += out_header.records_count
                    if self.throttler is not None:
                        self.throttler.maybe_throttle(len(out_data))
            try:
                mtime: float | None = os.stat(group[-1].log_path).st_mtime
            except FileNotFoundError as exc:
                raise CleaningAborted(f"{group[-1].log_path} is gone") from exc
            writer.write_txn_index(policy.cleaned_index[marked:])
            writer.finish(mtime)
        except BaseException:
            writer.abandon()
            raise
        self._check(plog)
        if not plog.replace_segments(group, base):
            for p in cleaned_paths(plog.dir, base):
                p.unlink(missing_ok=True)
            raise CleaningAborted(f"{plog.tp}: segments changed while cleaning")
        log.info(
            "%s: swapped in cleaned segment %d for %s",
            plog.tp,
            base,
            ",".join(str(i.base_offset) for i in group),
        )

    def _filter_batch(
        self,
        h: BatchHeader,
        data: bytes,
        policy: TransactionPolicy,
        producers: dict[int, int],
        now_ms: int,
        delete_retention_ms: int,
        stats: CleanerStats,
    ) -> tuple[BatchHeader, bytes] | None:
        action = policy.on_batch(h, data)
        if action is BatchAction.KEEP:
            return h, data
        horizon = delete_horizon(h)
        if action is BatchAction.MARKER_REMOVABLE:
            return _removable_marker(h, data, horizon, producers, now_ms, delete_retention_ms)
        spans: list[RecordSpan] = []
        kept: list[RecordSpan] = []
        buf = data
        if action is BatchAction.FILTER:
            buf, spans = scan_records(data, h)
            omap = self.offset_map
            latest = omap.latest_offset
            get = omap.get
            base = h.base_offset
            expired = horizon is not None and now_ms >= horizon
            for span in spans:
                offset = base + span[0]
                if offset > latest:
                    kept.append(span)
                    continue
                key = span[3]
                if key is None:
                    stats.invalid_messages += 1
                    continue
                if offset < get(key):
                    continue
                if expired and not span[4]:
                    continue
                kept.append(span)
        set_horizon = horizon is None and any(not span[4] for span in kept)
        if action is BatchAction.FILTER and len(kept) == len(spans) and not set_horizon:
            return h, data
        if not kept:
            if h.producer_id >= 0 and producers.get(h.producer_id) == h.last_offset:
                out = build_empty(h)
            else:
                return None
        else:
            new_horizon = min(now_ms + delete_retention_ms, LONG_MAX) if set_horizon else horizon
            out = build_retained(h, buf, kept, new_horizon)
        return check_batch(out, 0, len(out), verify_crc=False), out


def _removable_marker(
    h: BatchHeader,
    data: bytes,
    horizon: int | None,
    producers: dict[int, int],
    now_ms: int,
    delete_retention_ms: int,
) -> tuple[BatchHeader, bytes] | None:
    """A marker no longer needed: kept with a delete horizon set now, kept until it passes,
    then dropped (an empty batch if it is its producer's last, as for any batch)."""
    if horizon is None:
        new_horizon = min(now_ms + delete_retention_ms, LONG_MAX)
        buf, spans = scan_records(data, h)
        out = build_retained(h, buf, spans, new_horizon)
    elif now_ms < horizon:
        return h, data
    elif producers.get(h.producer_id) == h.last_offset:
        out = build_empty(h)
    else:
        return None
    return check_batch(out, 0, len(out), verify_crc=False), out
