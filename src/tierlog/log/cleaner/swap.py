"""Kafka's crash-safe swap of cleaned segments, and its completion or rollback at load.

Cleaning one group of segments goes through these states on disk:

1. ``<base>.log.cleaned`` (+ ``.index.cleaned``, ``.timeindex.cleaned``) are written and
   fsynced; the old segments are untouched.
2. Every ``.cleaned`` file is renamed to ``.swap`` (the log file last), then the directory
   is fsynced: from here the cleaned segment is the truth.
3. The old segments' files are renamed to ``.deleted``.
4. The ``.swap`` files are renamed to their final names and the directory is fsynced.

``recover_interrupted_swap`` runs when a partition is loaded, before its segments are
opened, and puts the directory back in state 1-before or 4-after, never in between:

* any ``.cleaned`` file means step 2 did not finish: they are deleted, and so is every
  ``.swap`` file at or above the lowest ``.cleaned`` base offset (rollback);
* a ``.swap`` log that remains was fully renamed: the old segment files its offsets cover
  (``[base, next offset of the swap log)``) are deleted, its index files dropped (they are
  rebuilt from the log on load, since the segment then has no index) and it is renamed to
  ``.log`` (completion).

As in Kafka, completion knows the replaced range only from the swapped-in log itself: if
cleaning removed every record after some offset of a group, an old segment of that group
starting past it survives the recovery uncleaned. The log is still a valid compaction of the
original (that segment only holds records newer than those the cleaned one dropped), and the
next cleaning removes what it should have.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tierlog.fsutil import fsync_dir
from tierlog.log.names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
    offset_from_file_name,
)
from tierlog.protocol.records import LOG_OVERHEAD, RecordsError, check_batch

log = logging.getLogger(__name__)

SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def _swap_order(directory: Path, base_offset: int) -> list[tuple[str, Path]]:
    """(suffix, final path) of a cleaned segment's files, indexes first and the log last."""
    return [
        (suffix, directory / offset_file_name(base_offset, suffix))
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)
    ]


def cleaned_to_swap(directory: Path, base_offset: int) -> None:
    """Step 2: every ``.cleaned`` file of the segment becomes ``.swap``, the log last."""
    for _suffix, final in _swap_order(directory, base_offset):
        src = final.with_name(final.name + CLEANED_SUFFIX)
        if src.exists():
            os.replace(src, final.with_name(final.name + SWAP_SUFFIX))
    fsync_dir(directory)


def swap_to_final(directory: Path, base_offset: int) -> None:
    """Step 4: the ``.swap`` files take their final names."""
    for _suffix, final in _swap_order(directory, base_offset):
        src = final.with_name(final.name + SWAP_SUFFIX)
        if src.exists():
            os.replace(src, final)
    fsync_dir(directory)


def _base_of(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _next_offset_of(log_path: Path, base_offset: int) -> int:
    """One past the last whole, valid batch of a log file (headers only, no CRC)."""
    next_offset = base_offset
    fd = os.open(log_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos + LOG_OVERHEAD <= size:
            length = int.from_bytes(os.pread(fd, LOG_OVERHEAD, pos)[8:], "big", signed=True)
            batch_size = length + LOG_OVERHEAD
            if length <= 0 or pos + batch_size > size:
                break
            try:
                h = check_batch(os.pread(fd, batch_size, pos), 0, batch_size, verify_crc=False)
            except RecordsError:
                break
            next_offset = h.next_offset
            pos += batch_size
    finally:
        os.close(fd)
    return next_offset


def recover_interrupted_swap(directory: Path) -> None:
    """Complete or roll back a swap a crash interrupted (see the module docstring)."""
    names = [p.name for p in directory.iterdir()]
    cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX)]
    min_cleaned = min((b for n in cleaned if (b := _base_of(n)) is not None), default=None)
    for n in cleaned:
        log.info("%s: deleting %s of an interrupted cleaning", directory.name, n)
        (directory / n).unlink(missing_ok=True)
    swaps = [n for n in names if n.endswith(SWAP_SUFFIX)]
    complete: list[int] = []
    for n in swaps:
        base = _base_of(n)
        path = directory / n
        if base is None or (min_cleaned is not None and base >= min_cleaned):
            log.info("%s: rolling back %s", directory.name, n)
            path.unlink(missing_ok=True)
        elif n.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            complete.append(base)
        else:
            path.unlink(missing_ok=True)  # indexes are rebuilt from the swapped-in log
    for base in sorted(complete):
        swap_log = directory / (offset_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)
        end = _next_offset_of(swap_log, base)
        for p in list(directory.iterdir()):
            if not p.name.endswith(SEGMENT_SUFFIXES):
                continue
            old = offset_from_file_name(p) if _base_of(p.name) is not None else None
            if old is not None and base <= old < max(end, base + 1):
                log.info("%s: completing swap of %d, deleting %s", directory.name, base, p.name)
                p.unlink()
        os.replace(swap_log, directory / offset_file_name(base, LOG_SUFFIX))
        log.info("%s: completed the swap of cleaned segment %d", directory.name, base)
    if cleaned or swaps:
        fsync_dir(directory)
