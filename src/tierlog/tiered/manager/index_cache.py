"""RemoteIndexCache: remote offset/time/txn indexes kept on local disk (spec §5.6).

Every remote read needs the segment's offset index to turn an offset into a byte position,
and timestamp lookups need the time index; fetching them from the remote tier per request
would cost a round trip each. They are downloaded once into
``<log.dir>/remote-log-index-cache/<start>_<uuid>.index|.timeindex|.txnindex`` and
opened with the log's own index classes (``tierlog.log.index``), checked entry by entry.

Rules:

* Capacity is a byte budget (sum of the three file sizes per entry). Eviction is
  W-TinyLFU-like: new entries enter a small LRU window; when space is needed the window's
  oldest entry competes with the main area's oldest on a count-min frequency sketch (with
  periodic halving), and the less frequent one goes. Entries idle for ``ttl_ms`` expire.
* Downloads go to ``.tmp`` and are renamed into place, so a crash never leaves a half
  file under a final name. A file on disk that fails the sanity check is re-fetched; a
  missing remote transaction index becomes an empty local file.
* Eviction never deletes under a reader: the entry is closed and its files are renamed to
  ``.deleted`` at once (so a re-fetch of the same segment cannot collide), then the
  ``remote-log-index-cleaner`` thread deletes them after ``cleaner_delay_s``.
* On start-up leftover ``.tmp`` / ``.deleted`` files are removed and complete triplets are
  loaded back without any remote call.
* Concurrency: one lock guards the maps and is never held during I/O; a miss installs a
  per-segment loading future so concurrent readers of the same segment share one download
  and hits on other segments are not blocked.
* A miss fetches the offset index on the calling thread while a helper thread fetches the
  time index (then the transaction index): against an object store each fetch is a round
  trip of tens of ms, and done one after the other they would push the first read of a
  segment past ``remote.fetch.max.wait.ms``. The transaction index waits for the time index
  so a failed load fetches no more than a sequential one would.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import queue
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from tierlog.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from tierlog.log.txn_index import AbortedTxn, load_sealed_aborted_txns
from tierlog.tiered.api import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
    RemoteStorageManager,
)

__all__ = ["CacheStats", "IndexCacheClosedError", "IndexEntry", "RemoteIndexCache"]

log = logging.getLogger(__name__)

T = TypeVar("T")

DIR_NAME = "remote-log-index-cache"
TMP_SUFFIX = ".tmp"
DELETED_SUFFIX = ".deleted"
_SUFFIXES = (".index", ".timeindex", ".txnindex")
_INDEX_FETCHERS = 8


class IndexCacheClosedError(RuntimeError):
    """The cache was closed; no lookups are served."""


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    loads: int = 0


class IndexEntry:
    """The three indexes of one remote segment; closed once evicted."""

    def __init__(
        self,
        key: uuid.UUID,
        start_offset: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_path: Path,
    ) -> None:
        self.key = key
        self.start_offset = start_offset
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_path = txn_path
        self._txns: list[AbortedTxn] | None = None
        # what the entry costs in memory (mapped files count whole pages) plus the txn
        # index on disk, so the byte budget bounds RSS too
        self.weight = offset_index.memory_bytes + time_index.memory_bytes + txn_path.stat().st_size
        self.closed = False
        self.lock = threading.Lock()

    @property
    def paths(self) -> list[Path]:
        return [self.offset_index.path, self.time_index.path, self.txn_path]

    def aborted_txns(self) -> list[AbortedTxn]:
        if self._txns is None:
            self._txns = load_sealed_aborted_txns(self.txn_path)
        return self._txns

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.offset_index.close()
            self.time_index.close()


class _FrequencySketch:
    """Count-min sketch of 4-bit counters with aging, as W-TinyLFU uses for admission."""

    def __init__(self, width: int = 4096) -> None:
        self._width = width
        self._rows = [[0] * width for _ in range(4)]
        self._seeds = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F)
        self._additions = 0
        self._sample = 10 * width

    def _slots(self, key: uuid.UUID) -> Iterable[tuple[list[int], int]]:
        h = key.int
        for row, seed in zip(self._rows, self._seeds, strict=True):
            yield row, ((h ^ seed) * 0x100000001B3 >> 17) % self._width

    def increment(self, key: uuid.UUID) -> None:
        for row, i in self._slots(key):
            if row[i] < 15:
                row[i] += 1
        self._additions += 1
        if self._additions >= self._sample:
            self._additions //= 2
            for row in self._rows:
                for i in range(self._width):
                    row[i] >>= 1

    def frequency(self, key: uuid.UUID) -> int:
        return min(row[i] for row, i in self._slots(key))


def _fetch_to(path: Path, opener: Callable[[], BinaryIO]) -> None:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with opener() as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.replace(tmp, path)


class RemoteIndexCache:
    def __init__(
        self,
        log_dir: Path,
        rsm: RemoteStorageManager,
        max_bytes: int = 1 << 30,
        *,
        ttl_ms: int = 900_000,
        cleaner_delay_s: float = 1.0,
        clock_ms: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000,
    ) -> None:
        self.dir = log_dir / DIR_NAME
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stats = CacheStats()
        self._rsm = rsm
        self._max_bytes = max_bytes
        self._ttl_ms = ttl_ms
        self._clock = clock_ms
        self._cleaner_delay_s = cleaner_delay_s
        self._lock = threading.Lock()
        self._window: OrderedDict[uuid.UUID, IndexEntry] = OrderedDict()
        self._probation: OrderedDict[uuid.UUID, IndexEntry] = OrderedDict()
        self._protected: OrderedDict[uuid.UUID, IndexEntry] = OrderedDict()
        self._last_access: dict[uuid.UUID, int] = {}
        self._weight = 0
        self._loading: dict[uuid.UUID, Future[IndexEntry]] = {}
        self._sketch = _FrequencySketch()
        self._closed = False
        self._stop = threading.Event()
        self._cleanup: queue.Queue[tuple[float, IndexEntry] | None] = queue.Queue()
        # one helper per concurrent miss; threads start lazily, so an idle cache has none
        self._fetchers = ThreadPoolExecutor(
            _INDEX_FETCHERS, thread_name_prefix="remote-log-index-fetch"
        )
        self._cleaner = threading.Thread(
            target=self._clean_loop, name="remote-log-index-cleaner", daemon=True
        )
        self._rehydrate()
        self._cleaner.start()

    # --- public API ---------------------------------------------------------------

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._weight

    def __len__(self) -> int:
        with self._lock:
            return len(self._window) + len(self._probation) + len(self._protected)

    def __contains__(self, key: uuid.UUID) -> bool:
        with self._lock:
            return self._find(key) is not None

    def lookup_offset(self, md: RemoteLogSegmentMetadata, offset: int) -> int:
        """Byte position in the remote ``.log`` to start reading ``offset`` from."""
        return self._with_entry(md, lambda e: e.offset_index.lookup(offset).position)

    def lookup_timestamp(
        self, md: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int
    ) -> int:
        """Byte position of the last indexed batch that can hold ``timestamp``."""
        return self._with_entry(
            md,
            lambda e: (
                e.offset_index.lookup(
                    max(starting_offset, e.time_index.lookup(timestamp).offset)
                ).position
            ),
        )

    def aborted_txns(self, md: RemoteLogSegmentMetadata) -> list[AbortedTxn]:
        return self._with_entry(md, lambda e: e.aborted_txns())

    def get_entry(self, md: RemoteLogSegmentMetadata) -> IndexEntry:
        key = md.remote_log_segment_id.id
        while True:
            with self._lock:
                if self._closed:
                    raise IndexCacheClosedError("remote index cache is closed")
                entry = self._find(key)
                if entry is not None:
                    self.stats.hits += 1
                    self._touch(entry)
                    return entry
                fut = self._loading.get(key)
                owner = fut is None
                if fut is None:
                    self.stats.misses += 1
                    fut = Future()
                    self._loading[key] = fut
            if not owner:
                fut.result()
                continue
            try:
                entry = self._load(md)
            except BaseException as e:
                with self._lock:
                    self._loading.pop(key, None)
                fut.set_exception(e)
                raise
            with self._lock:
                self._loading.pop(key, None)
                if self._closed:
                    entry.close()
                    fut.set_result(entry)
                    raise IndexCacheClosedError("remote index cache is closed")
                self._insert(entry)
            fut.set_result(entry)
            return entry

    def remove(self, key: uuid.UUID) -> None:
        """Drop a segment's entry (its remote data was deleted); unknown ids are ignored."""
        with self._lock:
            entry = self._detach(key)
            if entry is not None:
                self._retire(entry)

    def remove_all(self, keys: Iterable[uuid.UUID]) -> None:
        for key in keys:
            self.remove(key)

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self._max_bytes = max_bytes
            for v in self._evict():
                self._retire(v)

    def expire_idle(self) -> int:
        """Evict entries idle longer than the TTL; returns how many went."""
        if self._ttl_ms < 0:
            return 0
        now = self._clock()
        with self._lock:
            stale = [k for k, t in self._last_access.items() if now - t >= self._ttl_ms]
            victims = [e for e in (self._detach(k) for k in stale) if e is not None]
            self.stats.evictions += len(victims)
            for v in victims:
                self._retire(v)
        return len(victims)

    def close(self) -> None:
        """Idempotent. Closes entries but keeps their files for the next start."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            entries = [*self._window.values(), *self._probation.values(), *self._protected.values()]
        self._stop.set()
        self._cleanup.put(None)
        self._cleaner.join(timeout=10)
        # a load still in flight finishes its fetch; its owner then sees the cache closed
        self._fetchers.shutdown(wait=False)
        for e in entries:
            e.close()

    # --- internals ----------------------------------------------------------------

    def _with_entry(self, md: RemoteLogSegmentMetadata, fn: Callable[[IndexEntry], T]) -> T:
        while True:
            entry = self.get_entry(md)
            with entry.lock:
                if not entry.closed:
                    return fn(entry)

    def _paths(self, md: RemoteLogSegmentMetadata) -> tuple[Path, Path, Path]:
        stem = f"{md.start_offset}_{md.remote_log_segment_id.id}"
        return tuple(self.dir / (stem + s) for s in _SUFFIXES)  # type: ignore[return-value]

    def _load(self, md: RemoteLogSegmentMetadata) -> IndexEntry:
        off_path, time_path, txn_path = self._paths(md)
        start = md.start_offset
        self.stats.loads += 1
        try:
            rest = self._fetchers.submit(self._load_time_and_txn, md, time_path, txn_path)
        except RuntimeError:  # shut down by a concurrent close
            raise IndexCacheClosedError("remote index cache is closed") from None
        try:
            offset_index = self._load_one(
                off_path,
                lambda: self._rsm.fetch_index(md, IndexType.OFFSET),
                lambda p: OffsetIndex.load_sealed(p, start),
            )
        except BaseException:
            # wait for the helper so its view is closed, not leaked; its error is secondary
            with contextlib.suppress(BaseException):
                rest.result().close()
            raise
        try:
            time_index = rest.result()
        except BaseException:
            offset_index.close()
            raise
        return IndexEntry(md.remote_log_segment_id.id, start, offset_index, time_index, txn_path)

    def _load_time_and_txn(
        self, md: RemoteLogSegmentMetadata, time_path: Path, txn_path: Path
    ) -> TimeIndex:
        start = md.start_offset
        time_index = self._load_one(
            time_path,
            lambda: self._rsm.fetch_index(md, IndexType.TIMESTAMP),
            lambda p: TimeIndex.load_sealed(p, start),
        )
        try:
            self._load_one(txn_path, lambda: self._fetch_txn(md), load_sealed_aborted_txns)
        except BaseException:
            time_index.close()
            raise
        return time_index

    def _fetch_txn(self, md: RemoteLogSegmentMetadata) -> BinaryIO:
        """The segment's transaction index; one uploaded empty (``txn_idx_empty``, as Kafka
        marks it) is not asked of the store."""
        if md.txn_idx_empty:
            return io.BytesIO(b"")
        try:
            return self._rsm.fetch_index(md, IndexType.TRANSACTION)
        except RemoteResourceNotFoundException:
            return io.BytesIO(b"")

    @staticmethod
    def _load_one(path: Path, fetch: Callable[[], BinaryIO], read: Callable[[Path], T]) -> T:
        if path.exists():
            try:
                return read(path)
            except CorruptIndexError as e:
                log.info("re-fetching corrupt cached index %s: %s", path.name, e)
        _fetch_to(path, fetch)
        return read(path)

    def _find(self, key: uuid.UUID) -> IndexEntry | None:
        for area in (self._window, self._probation, self._protected):
            e = area.get(key)
            if e is not None:
                return e
        return None

    def _touch(self, entry: IndexEntry) -> None:
        key = entry.key
        self._sketch.increment(key)
        self._last_access[key] = self._clock()
        if key in self._window:
            self._window.move_to_end(key)
        elif key in self._probation:
            del self._probation[key]
            self._protected[key] = entry
            protected_cap = int(self._max_bytes * 0.8)
            while (
                len(self._protected) > 1
                and sum(e.weight for e in self._protected.values()) > protected_cap
            ):
                k, e = self._protected.popitem(last=False)
                self._probation[k] = e
        elif key in self._protected:
            self._protected.move_to_end(key)

    def _insert(self, entry: IndexEntry) -> None:
        self._window[entry.key] = entry
        self._weight += entry.weight
        self._sketch.increment(entry.key)
        self._last_access[entry.key] = self._clock()
        victims = self._evict(keep=entry.key)
        for v in victims:
            self._retire(v)

    def _evict(self, keep: uuid.UUID | None = None) -> list[IndexEntry]:
        """Bring the weight within budget; the caller retires the returned entries. ``keep``
        (the entry just loaded, which its caller is about to use) is never a victim: a budget
        smaller than one entry still serves every lookup, one load each."""
        victims: list[IndexEntry] = []
        window_cap = max(1, self._max_bytes // 100)
        while self._window and sum(e.weight for e in self._window.values()) > window_cap:
            k, e = self._window.popitem(last=False)
            self._probation[k] = e
            if self._weight > self._max_bytes and len(self._probation) > 1:
                # the newcomer competes with the main area's oldest entry
                victim_key = next(iter(self._probation))
                loser = (
                    k
                    if self._sketch.frequency(k) <= self._sketch.frequency(victim_key) and k != keep
                    else victim_key
                )
                if loser != keep:
                    victims.append(self._detach_unlocked(loser))
        while self._weight > self._max_bytes:
            candidates = (k for a in (self._probation, self._protected, self._window) for k in a)
            victim = next((k for k in candidates if k != keep), None)
            if victim is None:
                break
            victims.append(self._detach_unlocked(victim))
        self.stats.evictions += len(victims)
        return victims

    def _detach(self, key: uuid.UUID) -> IndexEntry | None:
        if self._find(key) is None:
            return None
        return self._detach_unlocked(key)

    def _detach_unlocked(self, key: uuid.UUID) -> IndexEntry:
        for area in (self._window, self._probation, self._protected):
            e = area.pop(key, None)
            if e is not None:
                self._weight -= e.weight
                self._last_access.pop(key, None)
                return e
        raise KeyError(key)

    def _retire(self, entry: IndexEntry) -> None:
        """Close now, rename to ``.deleted`` now, delete later on the cleaner thread.

        Called with the cache lock held, so a re-load of the same segment that starts after
        the eviction can never pick up (or lose) the files being retired.
        """
        entry.close()
        for p in entry.paths:
            with contextlib.suppress(FileNotFoundError):
                os.replace(p, p.with_name(p.name + DELETED_SUFFIX))
        self._cleanup.put((time.monotonic() + self._cleaner_delay_s, entry))

    def _clean_loop(self) -> None:
        while True:
            try:
                item = self._cleanup.get(timeout=1.0)
            except queue.Empty:
                self._guarded(self.expire_idle)
                continue
            if item is None:
                return
            due, entry = item
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return  # leftover .deleted files are removed on the next start
            self._guarded(functools.partial(self._delete_files, entry))

    @staticmethod
    def _delete_files(entry: IndexEntry) -> None:
        for p in entry.paths:
            with contextlib.suppress(FileNotFoundError):
                p.with_name(p.name + DELETED_SUFFIX).unlink()

    @staticmethod
    def _guarded(fn: Callable[[], object]) -> None:
        """The cleaner thread must survive any single failure."""
        try:
            fn()
        except Exception:
            log.exception("remote index cache cleanup failed")

    def _rehydrate(self) -> None:
        for p in self.dir.iterdir():
            if p.name.endswith((TMP_SUFFIX, DELETED_SUFFIX)):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
        for p in sorted(self.dir.glob("*.index")):
            stem = p.name[: -len(".index")]
            start_s, _, uuid_s = stem.partition("_")
            time_path = self.dir / (stem + ".timeindex")
            txn_path = self.dir / (stem + ".txnindex")
            if not (time_path.exists() and txn_path.exists()):
                continue
            try:
                start, key = int(start_s), uuid.UUID(uuid_s)
                oi = OffsetIndex.load_sealed(p, start)
                ti = TimeIndex.load_sealed(time_path, start)
                load_sealed_aborted_txns(txn_path)
            except (ValueError, CorruptIndexError) as e:
                log.info("dropping unusable cached index %s: %s", stem, e)
                for q in (p, time_path, txn_path):
                    with contextlib.suppress(FileNotFoundError):
                        q.unlink()
                continue
            entry = IndexEntry(key, start, oi, ti, txn_path)
            self._window[key] = entry
            self._weight += entry.weight
            self._last_access[key] = self._clock()
        victims = self._evict()
        for v in victims:
            self._retire(v)
