"""Byte-bounded caches with single-flight loading, frequency-aware eviction and a TTL.

Rules (all caches: chunks in memory or on disk, manifests, indexes):

* A key is loaded at most once at a time: concurrent readers of a key being loaded wait for
  that load (single-flight), so each chunk costs one GET however many readers want it.
* A failed load is never cached: its waiters get the error, the next reader loads again
  (a cached failure would fail every later reader of the key until it is evicted).
* Eviction is a segmented LRU by weight: new entries enter a probation segment; a second
  read promotes them to a protected segment (80% of the capacity). A sequential scan of
  cold data therefore only churns probation and does not flush the hot set. Prefetched
  entries enter probation unread, so prefetching alone never promotes anything; the first
  read of a prefetched entry puts it at the eviction end of probation, behind nothing,
  because what is still unread there is worth more than what a sequential reader has had.
* Entries expire a fixed time after their last access (checked lazily at the cold ends).
* The disk store writes each chunk into a free slot of one file (a chunk that does not fit
  a slot, or finds none free, into a temp file renamed into place), and wipes its
  directory on start (entries are not trusted across restarts).
* With a writer pool, a loaded value is handed to its waiters at once, from memory, and
  stored by the pool (off the reader's path); until stored it stays in flight, so readers
  of the key share it and nothing loads it again. At most ``max_pending_writes`` values wait
  to be stored: a value loaded while that many wait is served but not kept (counted as an
  eviction with cause ``backlog``), so a slow disk never holds memory or a reader; a
  ``prefetch`` (loaded only to be kept, off every reader's path) is then stored by its own
  thread instead.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import mmap
import os
import shutil
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from tierlog.storage.objectstore import metrics
from tierlog.storage.objectstore.slot_file import SlotFile, SlotHandle

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
#: ``O_DIRECT`` where the platform has it (Linux), else 0: buffered writes.
_O_DIRECT: int = os.O_DIRECT if sys.platform == "linux" else 0
#: Offset, length and buffer alignment that ``O_DIRECT`` needs (a page covers every disk).
_DIRECT_ALIGN = mmap.PAGESIZE
#: Loaded chunks waiting for the disk-cache writer at most; more are served uncached.
PENDING_WRITES = 8
#: The disk chunk cache's slot file, in its directory.
SLOT_FILE_NAME = "chunks.slots"
#: Slots beyond what the capacity holds in whole chunks: an entry is written before the
#: entries it displaces are evicted, so a full cache needs a free slot for the newcomer.
SPARE_SLOTS = 2
V = TypeVar("V")
H = TypeVar("H")


@dataclass(slots=True)
class _Entry(Generic[H]):
    handle: H
    weight: int
    last_access: float
    reads: int
    prefetched: bool
    protected: bool = False


class SlruPolicy(Generic[K, H]):
    """Bookkeeping of which keys are resident; not thread-safe (the cache locks it)."""

    def __init__(self, capacity: int, ttl_seconds: float, protected_fraction: float = 0.8):
        self.capacity = capacity
        self.ttl = ttl_seconds
        self.protected_capacity = int(capacity * protected_fraction)
        self._probation: OrderedDict[K, _Entry[H]] = OrderedDict()
        self._protected: OrderedDict[K, _Entry[H]] = OrderedDict()
        self.weight = 0
        self._protected_weight = 0

    def __len__(self) -> int:
        return len(self._probation) + len(self._protected)

    def __contains__(self, key: K) -> bool:
        return key in self._probation or key in self._protected

    def lookup(self, key: K, now: float) -> _Entry[H] | None:
        """The entry if resident and fresh, recording the access; None otherwise."""
        entry = self._probation.get(key) or self._protected.get(key)
        if entry is None:
            return None
        if now - entry.last_access > self.ttl:
            return None
        entry.last_access = now
        entry.reads += 1
        if entry.protected:
            self._protected.move_to_end(key)
        elif entry.reads >= 2:
            del self._probation[key]
            entry.protected = True
            self._protected[key] = entry
            self._protected_weight += entry.weight
            self._demote_overflow()
        else:
            self._probation.move_to_end(key)
        return entry

    def lookup_quietly(self, key: K, now: float) -> _Entry[H] | None:
        """The entry if resident and fresh, recording no access (a read-ahead load)."""
        entry = self._probation.get(key) or self._protected.get(key)
        if entry is None or now - entry.last_access > self.ttl:
            return None
        return entry

    def retire(self, key: K, entry: _Entry[H]) -> None:
        """Read-ahead has reached its reader: put the entry at the eviction end of
        probation. The sequential reader it was loaded for has it now and will not come
        back, while chunks loaded ahead for this and other readers are still unread; left
        at the recent end it would outlive them, and several cold readers sharing the
        cache would evict each other's read-ahead and fetch every chunk twice. Called
        once the reader holds the value (a disk entry evicted after that stays readable
        through the reader's mapping); a second read still promotes it."""
        if not entry.protected and self._probation.get(key) is entry:
            self._probation.move_to_end(key, last=False)

    def remove_entry(self, key: K, entry: _Entry[H]) -> bool:
        """Remove ``key`` only if ``entry`` is still what it maps to (not a newer load)."""
        if (self._probation.get(key) or self._protected.get(key)) is not entry:
            return False
        self._discard(key, entry)
        return True

    def add(
        self, key: K, handle: H, weight: int, now: float, *, prefetched: bool
    ) -> list[tuple[K, H, str]]:
        """Insert; returns evicted (key, handle, cause). An entry heavier than the whole
        capacity is returned as evicted at once (never admitted)."""
        evicted: list[tuple[K, H, str]] = []
        old = self.remove(key)
        if old is not None:
            evicted.append((key, old.handle, "replaced"))
        if weight > self.capacity:
            evicted.append((key, handle, "size"))
            return evicted
        self._probation[key] = _Entry(handle, weight, now, 0 if prefetched else 1, prefetched)
        self.weight += weight
        evicted.extend(self.expire(now))
        while self.weight > self.capacity:
            source = self._probation if self._probation else self._protected
            victim_key, victim = next(iter(source.items()))
            self._discard(victim_key, victim)
            evicted.append((victim_key, victim.handle, "size"))
        return evicted

    def remove(self, key: K) -> _Entry[H] | None:
        entry = self._probation.get(key) or self._protected.get(key)
        if entry is not None:
            self._discard(key, entry)
        return entry

    def expire(self, now: float) -> list[tuple[K, H, str]]:
        expired: list[tuple[K, H, str]] = []
        for segment in (self._probation, self._protected):
            while segment:
                key, entry = next(iter(segment.items()))
                if now - entry.last_access <= self.ttl:
                    break
                self._discard(key, entry)
                expired.append((key, entry.handle, "expired"))
        return expired

    def clear(self) -> list[tuple[K, H, str]]:
        dropped = [(k, e.handle, "invalidated") for k, e in self._probation.items()]
        dropped += [(k, e.handle, "invalidated") for k, e in self._protected.items()]
        self._probation.clear()
        self._protected.clear()
        self.weight = self._protected_weight = 0
        return dropped

    def _discard(self, key: K, entry: _Entry[H]) -> None:
        if entry.protected:
            del self._protected[key]
            self._protected_weight -= entry.weight
        else:
            del self._probation[key]
        self.weight -= entry.weight

    def _demote_overflow(self) -> None:
        while self._protected_weight > self.protected_capacity and self._protected:
            key, entry = self._protected.popitem(last=False)
            self._protected_weight -= entry.weight
            entry.protected = False
            self._probation[key] = entry


class _Store(ABC, Generic[K, V, H]):
    """Where cached values live; handles are what the policy keeps per key."""

    @abstractmethod
    def persist(self, key: K, value: V) -> H: ...

    @abstractmethod
    def materialise(self, handle: H) -> V | None:
        """The value, or None if it vanished (a disk file evicted meanwhile)."""

    @abstractmethod
    def discard(self, handle: H) -> None: ...

    def close(self) -> None:
        """Release what the store holds open (nothing, unless it says otherwise)."""


class _MemoryStore(_Store[K, V, V]):
    def persist(self, key: K, value: V) -> V:
        return value

    def materialise(self, handle: V) -> V | None:
        return handle

    def discard(self, handle: V) -> None:
        pass


class _DiskStore(_Store[K, bytes | memoryview, Path | SlotHandle]):
    """Chunks on disk: in the slots of one file (``SlotFile``) when given a slot size, and
    as files of their own otherwise (no slot store, a chunk larger than a slot, or no slot
    free). A hit maps the slot or file instead of reading it: a reader usually wants a
    fraction of a chunk (a 1 MiB Fetch from a 4 MiB chunk), and with a mapping only the
    pages it touches are read, straight from the page cache with no copy. The mapping stays
    valid if the entry is evicted while a reader still holds it (a file is unlinked, a slot
    is not reused until unmapped).

    Chunks are written with ``O_DIRECT`` where the file system takes it: the chunk goes to
    the disk from one page-aligned buffer instead of being copied into new page-cache pages,
    the largest CPU cost of a cold read with a buffered write (most of a core-second per
    GiB on a VM whose memory is backed on first touch, against ~0.15 s for the copy into
    the aligned buffer). The written chunk was just served from memory, so nothing is lost
    by not keeping it in the page cache; a later hit reads it from the disk. Where
    ``O_DIRECT`` is refused the store writes buffered from then on. A chunk that was
    received into a page-aligned buffer with room for the padding (``aligned`` finds it:
    the GET buffer pool's slots) is written from there, without the copy."""

    def __init__(
        self,
        directory: Path,
        name_of: Callable[[K], str],
        aligned: Callable[[memoryview, int], memoryview | None] | None = None,
        slot_size: int = 0,
        slots: int = 0,
    ) -> None:
        self._dir = directory
        self._name_of = name_of
        self._aligned_source = aligned
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._direct = _O_DIRECT != 0
        self._aligned: mmap.mmap | None = None  # one page-aligned buffer, reused
        self._aligned_lock = threading.Lock()
        self._slots = (
            SlotFile(directory / SLOT_FILE_NAME, slot_size, slots)
            if slot_size > 0 and slots > 0
            else None
        )

    def persist(self, key: K, value: bytes | memoryview) -> Path | SlotHandle:
        slots = self._slots
        if slots is not None and len(value) <= slots.slot_size:
            index = slots.take()
            if index is not None:
                return self._write_slot(slots, index, value)
        # no slot store, a value larger than a slot, or no slot free: a file of its own
        with self._seq_lock:
            self._seq += 1
            seq = self._seq
        final = self._dir / f"{self._name_of(key)}.{seq}"
        tmp = self._dir / f".{final.name}.tmp"
        try:
            if not (self._direct and self._write_direct(tmp, value)):
                with open(tmp, "wb") as f:
                    f.write(value)
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a partial file would sit outside the capacity
            raise
        return final

    def _write_slot(self, slots: SlotFile, index: int, value: bytes | memoryview) -> SlotHandle:
        """``value`` into the reserved slot ``index``; the slot is free again on failure."""
        size = len(value)
        if not slots.direct or size == 0:
            return slots.write(index, value, size)
        writing = False
        try:
            with self._aligned_view(value, slots.padded_length(size)) as view:
                writing = True  # from here ``write`` gives the slot back if it fails
                return slots.write(index, view, size)
        except BaseException:
            if not writing:
                slots.give_back(index)
            raise

    def _write_direct(self, path: Path, value: bytes | memoryview) -> bool:
        """Write ``value`` to ``path`` with ``O_DIRECT``; False (nothing written) where the
        file system refuses it, which turns direct writes off."""
        size = len(value)
        padded = -(-size // _DIRECT_ALIGN) * _DIRECT_ALIGN
        if padded == 0:
            return False
        with self._aligned_view(value, padded) as view:
            return self._write_padded(path, view, size)

    @contextmanager
    def _aligned_view(self, value: bytes | memoryview, padded: int) -> Iterator[memoryview]:
        """``value`` at the start of a page-aligned view ``padded`` bytes long: the buffer
        it was received into when ``aligned`` knows it, else a copy in this store's own
        buffer (held, under its lock, for as long as the view is used)."""
        source = (
            self._aligned_source(value, padded)
            if self._aligned_source is not None and isinstance(value, memoryview)
            else None
        )
        if source is not None:
            with source:
                yield source
            return
        with self._aligned_lock:
            if self._aligned is None or len(self._aligned) < padded:
                if self._aligned is not None:
                    self._aligned.close()
                self._aligned = mmap.mmap(-1, padded)
            buf = self._aligned
            buf[: len(value)] = value
            with memoryview(buf)[:padded] as view:
                yield view

    def _write_padded(self, path: Path, view: memoryview, size: int) -> bool:
        """Write the page-aligned ``view`` (its length a multiple of the alignment) with
        ``O_DIRECT`` and cut the file to ``size``; False where ``O_DIRECT`` is refused."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_DIRECT, 0o644)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            self._direct = False
            return False
        try:
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
            os.ftruncate(fd, size)
        except OSError as e:
            os.close(fd)
            if e.errno != errno.EINVAL:
                raise
            self._direct = False
            return False
        os.close(fd)
        return True

    def materialise(self, handle: Path | SlotHandle) -> bytes | memoryview | None:
        if isinstance(handle, SlotHandle):
            assert self._slots is not None
            return self._slots.map(handle)
        try:
            with open(handle, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return b""
                return memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ))
        except FileNotFoundError:
            return None

    def discard(self, handle: Path | SlotHandle) -> None:
        if isinstance(handle, SlotHandle):
            assert self._slots is not None
            self._slots.release(handle)
            return
        try:
            handle.unlink()
        except FileNotFoundError:
            pass

    def close(self) -> None:
        if self._slots is not None:
            self._slots.close()


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    load_failures: int = 0
    prefetch_loads: int = 0
    prefetch_hits: int = 0
    store_failures: int = 0
    store_skipped: int = 0


@dataclass(slots=True)
class _Flight(Generic[V]):
    future: Future[V]
    prefetch: bool
    joined: bool = False
    reached: bool = False  # its read-ahead reader has had it (see ``reached``)
    keep: bool = False  # loaded only to be kept (``prefetch``): never dropped for backlog


class Cache(Generic[K, V, H]):
    """A single-flight, byte-bounded cache in front of a loader."""

    def __init__(
        self,
        name: str,
        store: _Store[K, V, H],
        *,
        capacity_bytes: int,
        ttl_seconds: float,
        weigher: Callable[[V], int],
        clock: Callable[[], float] = time.monotonic,
        writer: Executor | None = None,
        max_pending_writes: int = 8,
    ) -> None:
        self.name = name
        self._store = store
        self._writer = writer
        self._max_pending_writes = max_pending_writes
        self._pending_writes = 0
        self._policy: SlruPolicy[K, H] = SlruPolicy(capacity_bytes, ttl_seconds)
        self._weigher = weigher
        self._clock = clock
        self._lock = threading.Lock()
        self._flights: dict[K, _Flight[V]] = {}
        self.stats = CacheStats()

    @property
    def weight(self) -> int:
        return self._policy.weight

    def __len__(self) -> int:
        return len(self._policy)

    def __contains__(self, key: K) -> bool:
        with self._lock:
            return key in self._policy

    def holds(self, key: K) -> bool:
        """Resident or being loaded: asking for it again would not cost a load."""
        with self._lock:
            return key in self._policy or key in self._flights

    def get(self, key: K, loader: Callable[[], V]) -> V:
        while True:
            read_ahead_hit = False
            with self._lock:
                entry = self._policy.lookup(key, self._clock())
                flight = None if entry is not None else self._flights.get(key)
                owner = entry is None and flight is None
                if owner:
                    flight = self._flights[key] = _Flight(Future(), prefetch=False)
                elif entry is not None and entry.prefetched:
                    entry.prefetched = False
                    read_ahead_hit = entry.reads == 1
                    self._count_prefetch_hit()
                elif flight is not None and flight.prefetch and not flight.joined:
                    flight.joined = True
                    self._count_prefetch_hit()
            if entry is not None:
                value = self._store.materialise(entry.handle)
                if value is not None:
                    if read_ahead_hit:
                        with self._lock:
                            self._policy.retire(key, entry)
                    self.stats.hits += 1
                    metrics.CACHE_HITS.labels(self.name).inc()
                    return value
                with self._lock:  # the file vanished under us: forget it and reload
                    if self._policy.remove_entry(key, entry):
                        metrics.CACHE_BYTES.labels(self.name).set(self._policy.weight)
                self._store.discard(entry.handle)
                continue
            assert flight is not None
            if not owner:
                self.stats.hits += 1
                metrics.CACHE_HITS.labels(self.name).inc()
                return flight.future.result()
            return self._load(key, loader, flight, prefetch=False)

    def load_ahead(self, key: K, loader: Callable[[], V]) -> V:
        """The value for a read-ahead stream, which keeps it until its reader gets there:
        resident or in flight, that value (not counted as a read, nothing promoted);
        otherwise loaded here as a prefetch."""
        with self._lock:
            entry = self._policy.lookup_quietly(key, self._clock())
            flight = None if entry is not None else self._flights.get(key)
            if entry is None and flight is None:
                flight = self._flights[key] = _Flight(Future(), prefetch=True)
                owner = True
            else:
                owner = False
        if entry is not None:
            value = self._store.materialise(entry.handle)
            if value is not None:
                return value
            return self.get(key, loader)
        assert flight is not None
        if not owner:
            return flight.future.result()
        value = self._load(key, loader, flight, prefetch=True)
        self.stats.prefetch_loads += 1
        metrics.PREFETCH_CHUNKS.inc()
        return value

    def reached(self, key: K) -> None:
        """A read-ahead stream's reader has had the value ``load_ahead`` gave it: count the
        read-ahead hit and retire the entry as ``get`` retires a read-ahead hit."""
        self._count_prefetch_hit()
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                flight.reached = True
                return
            entry = self._policy.lookup(key, self._clock())
            if entry is not None and entry.prefetched:
                entry.prefetched = False
                if entry.reads == 1:
                    self._policy.retire(key, entry)

    def prefetch(self, key: K, loader: Callable[[], V]) -> bool:
        """Load ``key`` in the calling thread unless resident or in flight; True if loaded."""
        with self._lock:
            if key in self._policy or key in self._flights:
                return False
            flight = self._flights[key] = _Flight(Future(), prefetch=True, keep=True)
        try:
            self._load(key, loader, flight, prefetch=True)
        except Exception:
            return False
        self.stats.prefetch_loads += 1
        metrics.PREFETCH_CHUNKS.inc()
        return True

    def invalidate(self, key: K) -> None:
        with self._lock:
            entry = self._policy.remove(key)
            metrics.CACHE_BYTES.labels(self.name).set(self._policy.weight)
        if entry is not None:
            self._store.discard(entry.handle)
            metrics.CACHE_EVICTIONS.labels(self.name, "invalidated").inc()

    def clear(self) -> None:
        with self._lock:
            dropped = self._policy.clear()
            metrics.CACHE_BYTES.labels(self.name).set(0)
        for _, handle, _cause in dropped:
            self._store.discard(handle)

    def close(self) -> None:
        """Drop every entry and release what the store holds open; values already handed
        out stay readable."""
        self.clear()
        self._store.close()

    def _load(self, key: K, loader: Callable[[], V], flight: _Flight[V], *, prefetch: bool) -> V:
        self.stats.misses += 1
        metrics.CACHE_MISSES.labels(self.name).inc()
        try:
            value = loader()
            weight = self._weigher(value)
        except BaseException as e:
            with self._lock:
                self._flights.pop(key, None)
            self.stats.load_failures += 1
            metrics.CACHE_LOAD_FAILURES.labels(self.name).inc()
            flight.future.set_exception(e)
            raise
        if weight > self._policy.capacity:
            with self._lock:
                self._flights.pop(key, None)
            flight.future.set_result(value)
            return value
        if self._writer is None:
            self._admit(key, value, weight, flight, prefetch)
            flight.future.set_result(value)
            return value
        with self._lock:
            queued = self._pending_writes < self._max_pending_writes
            if queued:
                self._pending_writes += 1
            elif not flight.keep:
                self._flights.pop(key, None)
        if not queued and flight.keep:
            # a prefetch (``warm``) runs off every reader's path and is loaded only to be
            # kept: store it here rather than fetch it for nothing
            self._admit(key, value, weight, flight, prefetch)
            flight.future.set_result(value)
            return value
        flight.future.set_result(value)  # waiters are served from memory, now
        if not queued:
            self.stats.store_skipped += 1
            metrics.CACHE_EVICTIONS.labels(self.name, "backlog").inc()
            return value
        try:
            self._writer.submit(self._write_behind, key, value, weight, flight, prefetch)
        except RuntimeError:  # the writer is shut down: the plugin is closing
            with self._lock:
                self._pending_writes -= 1
                self._flights.pop(key, None)
        return value

    def _write_behind(
        self, key: K, value: V, weight: int, flight: _Flight[V], prefetch: bool
    ) -> None:
        try:
            self._admit(key, value, weight, flight, prefetch)
        finally:
            with self._lock:
                self._pending_writes -= 1

    def _admit(self, key: K, value: V, weight: int, flight: _Flight[V], prefetch: bool) -> None:
        """Store ``value`` and make it resident; the flight ends here either way."""
        try:
            handle = self._keep(key, value)
        except BaseException:
            with self._lock:
                self._flights.pop(key, None)
            raise
        evicted: list[tuple[K, H, str]] = []
        with self._lock:
            if handle is not None:
                prefetched = prefetch and not flight.joined and not flight.reached
                evicted = self._policy.add(
                    key, handle, weight, self._clock(), prefetched=prefetched
                )
                if flight.reached:
                    entry = self._policy.lookup_quietly(key, self._clock())
                    if entry is not None:
                        entry.reads = max(entry.reads, 1)
                        self._policy.retire(key, entry)
            self._flights.pop(key, None)
            metrics.CACHE_BYTES.labels(self.name).set(self._policy.weight)
        for _key, old_handle, cause in evicted:
            self._store.discard(old_handle)
            if cause != "replaced":
                self.stats.evictions += 1
                metrics.CACHE_EVICTIONS.labels(self.name, cause).inc()

    def _keep(self, key: K, value: V) -> H | None:
        """The stored handle, or None when the store fails (disk full or failing): that
        costs the cache, not the read, since the value was fetched and checked."""
        try:
            return self._store.persist(key, value)
        except OSError as e:
            self.stats.store_failures += 1
            metrics.CACHE_STORE_FAILURES.labels(self.name).inc()
            log.warning("%s cache could not keep %r, serving it uncached: %s", self.name, key, e)
            return None

    def _count_prefetch_hit(self) -> None:
        self.stats.prefetch_hits += 1
        metrics.PREFETCH_HITS.inc()


ChunkKey = tuple[str, int]


def memory_cache(
    name: str,
    *,
    capacity_bytes: int,
    ttl_seconds: float,
    weigher: Callable[[V], int],
    clock: Callable[[], float] = time.monotonic,
) -> Cache[K, V, V]:
    store: _MemoryStore[K, V] = _MemoryStore()
    return Cache(
        name,
        store,
        capacity_bytes=capacity_bytes,
        ttl_seconds=ttl_seconds,
        weigher=weigher,
        clock=clock,
    )


def disk_chunk_cache(
    directory: Path,
    *,
    capacity_bytes: int,
    ttl_seconds: float,
    clock: Callable[[], float] = time.monotonic,
    writer: Executor | None = None,
    max_pending_writes: int = 8,
    aligned: Callable[[memoryview, int], memoryview | None] | None = None,
    chunk_size: int = 0,
) -> Cache[ChunkKey, bytes | memoryview, Path | SlotHandle]:
    """Chunks on disk; with ``writer``, written behind the readers (see the module doc).
    ``aligned``: the page-aligned buffer a chunk was received into, if any (``_DiskStore``).
    ``chunk_size``: chunks up to this size go to the slots of one file (``SlotFile``),
    as many as the capacity holds plus ``SPARE_SLOTS``; a larger chunk (a segment
    uploaded with a larger ``chunk.size``), or any chunk while every slot is taken or
    still mapped, gets a file of its own. 0: a file per chunk."""
    slots = capacity_bytes // chunk_size if chunk_size > 0 else 0
    store: _DiskStore[ChunkKey] = _DiskStore(
        directory,
        _chunk_file_name,
        aligned,
        slot_size=chunk_size,
        slots=slots + SPARE_SLOTS if slots else 0,
    )
    return Cache(
        "chunk_disk",
        store,
        capacity_bytes=capacity_bytes,
        ttl_seconds=ttl_seconds,
        weigher=len,
        clock=clock,
        writer=writer,
        max_pending_writes=max_pending_writes,
    )


def _chunk_file_name(key: ChunkKey) -> str:
    digest = hashlib.blake2b(key[0].encode(), digest_size=16).hexdigest()
    return f"{digest}-{key[1]}"
