"""Helpers for the log-cleaner tests: keyed batches, whole-log reads, a cleaner to drive."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tierlog.log import PartitionLog
from tierlog.log.cleaner.cleaner import Cleaner
from tierlog.log.cleaner.config import CleanerConfig
from tierlog.log.cleaner.log_cleaner import LogCleaner
from tierlog.log.cleaner.offset_map import OffsetMap
from tierlog.protocol.records import (
    Compression,
    SimpleRecord,
    build_batch,
    iter_records,
    scan_batches,
)

Row = tuple[int, bytes | None, bytes | None, int]
"""(offset, key, value, timestamp) of one record read back."""


def keyed_batch(
    items: list[tuple[bytes | None, bytes | None]],
    *,
    ts: int,
    compression: Compression = Compression.NONE,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
) -> bytes:
    recs = [SimpleRecord(v, k, ts) for k, v in items]
    return build_batch(
        recs,
        timestamp=ts,
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def read_rows(plog: PartitionLog) -> list[Row]:
    """Every record from the log start to the end, in offset order."""
    rows: list[Row] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20).to_bytes()
        if not data:
            break
        for h in scan_batches(data):
            for rec in iter_records(data, h):
                if rec.offset >= offset:
                    rows.append((rec.offset, rec.key, rec.value, rec.timestamp))
            offset = max(offset, h.next_offset)
    return rows


def make_cleaner(
    logs: list[tuple[Path, PartitionLog]],
    clock: Callable[[], int],
    *,
    dedupe_buffer_size: int = 1 << 20,
) -> tuple[LogCleaner, Cleaner]:
    config = CleanerConfig(dedupe_buffer_size=dedupe_buffer_size)
    service = LogCleaner(config, lambda: logs, clock=clock)
    worker = Cleaner(OffsetMap(config.map_memory_per_thread, config.io_buffer_load_factor))
    return service, worker


def clean_fully(service: LogCleaner, worker: Cleaner, now: int, rounds: int = 50) -> int:
    """Run rounds until nothing is left to clean; returns how many rounds cleaned."""
    done = 0
    for _ in range(rounds):
        if not service.clean_once(worker, now):
            break
        done += 1
    return done
