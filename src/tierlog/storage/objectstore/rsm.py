"""``ObjectStoreRemoteStorageManager``: the production storage plugin (alias ``objectstore``).

Each segment becomes three objects (see ``layout`` and docs/remote-format.md): the chunked,
optionally compressed and encrypted ``.log``; the ``.indexes`` blob; the JSON manifest.
Reads go manifest (cached) -> chunk index -> one ranged GET per chunk (cached, single-flight,
read ahead in parallel) -> decrypt -> decompress.

Threads: the broker calls every method from its own worker threads. Blocking object-store
calls run on obstore's runtime with the GIL released. A reader's own chunk loads run inline
in its thread; chunk read-ahead (a stream's following chunks and ``warm``) runs on the
read-ahead pool, which has a thread for every chunk the read-ahead budget
(``fetch.chunk.cache.prefetch.total.max.size``) can hold: by Little's law a reader with ``W``
bytes in flight gets at most ``W / GET latency``, so a read-ahead GET that waits for a
thread is lost throughput, and a thread blocked in a GET costs no CPU. Index warming runs
on the fetch pool (``fetch.thread.pool.size``), upload transforms on the transform pool
(``upload.max.concurrency``) and disk-cache writes on one writer thread, behind the
readers. All pools and the budget are owned here and shut down by ``close``.

Read-ahead (docs/read-ahead.md): each stream sizes its window with ``window.WindowLaw``
up to ``fetch.chunk.cache.prefetch.max.size``; all streams together hold at most the
budget. A partition's next stream (its next segment) starts from the window and estimates
its previous stream ended with.
"""

from __future__ import annotations

import functools
import io
import logging
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from tierlog.storage.embedded import embedded_root
from tierlog.storage.objectstore import metrics
from tierlog.storage.objectstore.arriving import Arriving
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.storage.objectstore.budget import ReadAheadBudget
from tierlog.storage.objectstore.buffers import ChunkBuffers
from tierlog.storage.objectstore.cache import (
    PENDING_WRITES,
    Cache,
    ChunkKey,
    disk_chunk_cache,
    memory_cache,
)
from tierlog.storage.objectstore.config import ObjectStoreConfig, is_secret_key
from tierlog.storage.objectstore.custom_metadata import SegmentLocation
from tierlog.storage.objectstore.errors import CorruptDataError
from tierlog.storage.objectstore.fetch import ChunkStream
from tierlog.storage.objectstore.keyring import WRAP_ALGORITHM, KeyRing
from tierlog.storage.objectstore.layout import (
    SegmentKeys,
    identify_key,
    partition_dir,
    segment_keys,
)
from tierlog.storage.objectstore.manifest import (
    INDEX_NAMES,
    EncryptionInfo,
    ManifestError,
    SegmentManifest,
    compressed_bitmap,
    describes,
    metadata_from_json,
    metadata_to_json,
)
from tierlog.storage.objectstore.nearest_first import NearestFirstPool
from tierlog.storage.objectstore.ratelimit import TokenBucket
from tierlog.storage.objectstore.transform import (
    ENCRYPTION_OVERHEAD,
    ChunkDecoder,
    DataKey,
    blob_aad,
    decrypt,
)
from tierlog.storage.objectstore.upload import SegmentUploader
from tierlog.storage.objectstore.warmed import WarmedChunks
from tierlog.storage.objectstore.window import INITIAL_AHEAD, WindowLaw
from tierlog.tiered.api import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    ManifestContents,
    ObjectKind,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RemoteStorageManager,
    SegmentObject,
    StoredObject,
    SupportsReadAhead,
    SupportsSegmentManifests,
    TopicIdPartition,
)

log = logging.getLogger(__name__)


def _pretouch(buffers: ChunkBuffers) -> None:
    """``fetch.buffers.pretouch.enabled``: the GET pool made resident off every reader's
    path, on a thread of its own that the plugin's ``close`` joins."""
    started = time.monotonic()
    done = buffers.pretouch()
    if done is None:
        log.info("GET buffers: this kernel cannot populate memory ahead (MADV_POPULATE_WRITE)")
    else:
        log.info(
            "GET buffers: %d MiB made resident in %.2f s", done >> 20, time.monotonic() - started
        )


#: Partitions whose last read-ahead window is remembered for their next stream.
_LAWS_REMEMBERED = 1024
#: First-touch loads (an ``.indexes`` blob, a chunk 0) kept for their segment at most.
_FIRST_TOUCH_KEPT = 64


@dataclass(frozen=True)
class OpenSegment:
    """A parsed manifest plus what is needed to decode its chunks (the unwrapped key)."""

    keys: SegmentKeys
    manifest: SegmentManifest
    data_key: DataKey | None
    decoder: ChunkDecoder
    cache_id: str

    @property
    def size(self) -> int:
        return self.manifest.chunk_index.original_file_size


K = TypeVar("K")
V = TypeVar("V")


def _keep(kept: OrderedDict[K, V], key: K, value: V) -> None:
    """``kept[key] = value`` as its newest entry, the oldest dropped past
    ``_LAWS_REMEMBERED`` (one entry per partition read lately)."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > _LAWS_REMEMBERED:
        kept.popitem(last=False)


class ObjectStoreRemoteStorageManager(
    RemoteStorageManager, SupportsReadAhead, SupportsSegmentManifests
):
    def __init__(self) -> None:
        self._cfg: ObjectStoreConfig | None = None
        self._closed = False
        self._close_lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------

    @classmethod
    def config_is_sensitive(cls, key: str) -> bool:
        """Credentials and private-key locations are hidden; where the data lives and how
        it is chunked, compressed and encrypted can be discovered (e.g. by Spark jobs)."""
        return is_secret_key(key)

    @classmethod
    def default_config(cls, log_dirs: Sequence[Path]) -> Mapping[str, str]:
        """A ``file://`` store next to the first log dir (``embedded_root``), so a broker
        with no storage settings still tiers, to its own disk."""
        return {"storage.url": embedded_root(log_dirs).absolute().as_uri()}

    def configure(self, props: Mapping[str, str]) -> None:
        cfg = ObjectStoreConfig.from_props(props)
        self._cfg = cfg
        self.backend = ObjectBackend.from_config(cfg)
        self.keyring: KeyRing | None = None
        if cfg.encryption_key_pairs and cfg.encryption_key_pair_id:
            self.keyring = KeyRing.from_files(cfg.encryption_key_pairs, cfg.encryption_key_pair_id)
        self._fetch_pool = ThreadPoolExecutor(
            cfg.fetch_thread_pool_size, thread_name_prefix="tierlog-rsm-fetch"
        )
        self._transform_pool = ThreadPoolExecutor(
            cfg.upload_max_concurrency, thread_name_prefix="tierlog-rsm-transform"
        )
        self._read_ahead = cfg.fetch_chunk_cache_prefetch_max_size // cfg.chunk_size
        self.read_ahead_budget = ReadAheadBudget(
            cfg.fetch_chunk_cache_prefetch_total_max_size,
            chunk=cfg.chunk_size,
            idle_s=cfg.fetch_chunk_cache_prefetch_idle_timeout_ms / 1000,
        )
        self._warm_account = self.read_ahead_budget.open_in_flight()
        self._warmed = WarmedChunks(
            self._warm_account, idle_s=cfg.fetch_chunk_cache_prefetch_idle_timeout_ms / 1000
        )
        self._laws: OrderedDict[TopicIdPartition, WindowLaw] = OrderedDict()
        self._laws_lock = threading.Lock()
        self._window_listener: Callable[[TopicIdPartition], None] | None = None
        budget_chunks = cfg.fetch_chunk_cache_prefetch_total_max_size // cfg.chunk_size
        self._ahead_pool = NearestFirstPool(
            min(cfg.fetch_chunk_cache_prefetch_max_concurrency, max(1, budget_chunks)),
            thread_name_prefix="tierlog-rsm-ahead",
        )
        # each partition's latest stream and its segment, for the ranks of warmed chunks
        self._reading: OrderedDict[TopicIdPartition, tuple[str, weakref.ref[ChunkStream]]] = (
            OrderedDict()
        )
        self._cache_writer: ThreadPoolExecutor | None = None
        self._first_touch: OrderedDict[str, Future[Any]] = OrderedDict()
        #: the receive buffer of each early chunk-0 GET in ``_first_touch``, same keys
        self._arriving: dict[str, Arriving] = {}
        self._first_touch_lock = threading.Lock()
        rate = cfg.upload_rate_limit_bytes_per_second
        self._uploader = SegmentUploader(
            self.backend,
            chunk_size=cfg.chunk_size,
            compression=cfg.compression_enabled,
            compression_heuristic=cfg.compression_heuristic_enabled,
            compression_level=cfg.compression_level,
            rate_limiter=TokenBucket(rate) if rate else None,
            transform_pool=self._transform_pool,
            transform_ahead=cfg.upload_max_concurrency,
        )
        self.manifest_cache: Cache[str, OpenSegment, OpenSegment] = memory_cache(
            "manifest",
            capacity_bytes=cfg.fetch_manifest_cache_size,
            ttl_seconds=cfg.fetch_manifest_cache_retention_ms / 1000,
            weigher=lambda seg: seg.manifest.memory_size(),
        )
        self.index_cache: Cache[tuple[str, int], bytes, bytes] = memory_cache(
            "indexes",
            capacity_bytes=cfg.fetch_indexes_cache_size,
            ttl_seconds=cfg.fetch_indexes_cache_retention_ms / 1000,
            weigher=len,
        )
        chunk_ttl = cfg.fetch_chunk_cache_retention_ms / 1000
        self.chunk_cache: Cache[ChunkKey, bytes | memoryview, Any]
        if cfg.fetch_chunk_cache_class == "disk":
            assert cfg.fetch_chunk_cache_path is not None
            self._cache_writer = ThreadPoolExecutor(1, thread_name_prefix="tierlog-rsm-cache")
            self.chunk_cache = disk_chunk_cache(
                Path(cfg.fetch_chunk_cache_path),
                capacity_bytes=cfg.fetch_chunk_cache_size,
                ttl_seconds=chunk_ttl,
                writer=self._cache_writer,
                max_pending_writes=PENDING_WRITES,
                aligned=None if self.backend.direct is None else self.backend.direct.buffers.padded,
                chunk_size=cfg.chunk_size,
            )
        else:
            capacity = cfg.fetch_chunk_cache_size if cfg.fetch_chunk_cache_class == "memory" else 0
            self.chunk_cache = memory_cache(
                "chunk_memory", capacity_bytes=capacity, ttl_seconds=chunk_ttl, weigher=len
            )
        self._caching_chunks = cfg.fetch_chunk_cache_class != "none"
        self._pretouch: threading.Thread | None = None
        if cfg.fetch_buffers_pretouch_enabled and self.backend.direct is not None:
            self._pretouch = threading.Thread(
                target=_pretouch,
                args=(self.backend.direct.buffers,),
                name="tierlog-rsm-pretouch",
                daemon=True,
            )
            self._pretouch.start()

    @property
    def read_ahead_bytes(self) -> int:
        """The most one stream loads ahead of its reader: ``prefetch.max.size`` in whole
        chunks, the cap of its adaptive window; 0 when chunks are not cached (``warm``
        would do nothing)."""
        if not self._caching_chunks:
            return 0
        return self._read_ahead * self.config.chunk_size

    def read_ahead_window(self, tip: TopicIdPartition) -> int:
        """The window the partition's latest stream has now (or ended with), so a caller
        continuing it into the next segment asks for what this reader drains, not the cap."""
        if not self._caching_chunks:
            return 0
        with self._laws_lock:
            law = self._laws.get(tip)
        if law is None:  # no stream yet: what a new one starts with
            return min(self._read_ahead, INITIAL_AHEAD) * self.config.chunk_size
        return law.window_bytes

    def watch_window(self, listener: Callable[[TopicIdPartition], None] | None) -> None:
        self._window_listener = listener

    def _window_grown(self, tip: TopicIdPartition) -> None:
        listener = self._window_listener
        if listener is not None:
            listener(tip)

    def _remember(self, tip: TopicIdPartition, law: WindowLaw) -> None:
        with self._laws_lock:
            _keep(self._laws, tip, law)

    def _law_for(self, tip: TopicIdPartition) -> WindowLaw:
        with self._laws_lock:
            previous = self._laws.get(tip)
        if previous is not None:
            law = previous.resumed()
        else:
            law = WindowLaw(self.config.chunk_size, self._read_ahead)
        self._remember(tip, law)
        return law

    @property
    def config(self) -> ObjectStoreConfig:
        if self._cfg is None:
            raise RemoteStorageException("ObjectStoreRemoteStorageManager used before configure")
        return self._cfg

    def close(self) -> None:
        with self._close_lock:
            if self._closed or self._cfg is None:
                self._closed = True
                return
            self._closed = True
        self._fetch_pool.shutdown(wait=True, cancel_futures=True)
        self._warmed.close()
        self._ahead_pool.shutdown(wait=True, cancel_futures=True)
        self._transform_pool.shutdown(wait=True, cancel_futures=True)
        if self._cache_writer is not None:
            self._cache_writer.shutdown(wait=True, cancel_futures=True)
        self.read_ahead_budget.close()
        self.backend.close()
        if self._pretouch is not None:  # stops at its next slot: the pool is closed
            self._pretouch.join()
        self.chunk_cache.close()
        self.manifest_cache.clear()
        self.index_cache.clear()

    # -- copy ---------------------------------------------------------------------------

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> CustomMetadata | None:
        cfg = self.config
        keys = segment_keys(cfg.key_prefix, cfg.key_prefix_mask, metadata)
        started = time.perf_counter()
        try:
            data_key = None
            encryption = None
            if cfg.encryption_enabled:
                assert self.keyring is not None
                data_key = DataKey.generate()
                key_id, wrapped = self.keyring.wrap(data_key.key)
                encryption = EncryptionInfo(
                    key_id, wrapped, data_key.aad, wrap_algorithm=WRAP_ALGORITHM
                )
            log_upload = self._uploader.upload_log(keys.log, data.log_segment, data_key)
            indexes = self._uploader.upload_indexes(keys.indexes, data, data_key)
            manifest = SegmentManifest(
                chunk_index=log_upload.chunk_index,
                compressed_chunks=None
                if log_upload.compressed is None
                else compressed_bitmap(log_upload.compressed),
                encryption=encryption,
                indexes=indexes.ranges,
                indexes_stored_size=indexes.stored_size,
                upload_id=uuid.uuid4().hex,
                segment=metadata_to_json(metadata),
            )
            manifest_bytes = manifest.to_json_bytes()
            self.backend.put_bytes(keys.manifest, manifest_bytes, "manifest")
        except BaseException as e:
            self._cleanup_failed_copy(keys)
            if isinstance(e, RemoteStorageException):
                raise
            if isinstance(e, Exception):
                raise RemoteStorageException(f"copy of {keys.base} failed: {e!r}") from e
            raise
        finally:
            metrics.SEGMENT_COPY_SECONDS.observe(time.perf_counter() - started)
        self.manifest_cache.invalidate(keys.manifest)
        self._forget_first_touch(keys)
        if not cfg.custom_metadata_enabled:
            return None
        stored = log_upload.chunk_index.stored_size + indexes.stored_size + len(manifest_bytes)
        location = SegmentLocation(cfg.key_prefix, cfg.key_prefix_mask, stored)
        return CustomMetadata(location.encode())

    def _cleanup_failed_copy(self, keys: SegmentKeys) -> None:
        try:
            self.backend.delete_many(keys.all())
        except Exception as e:  # best effort: the broker also deletes by metadata later
            log.warning("cleanup of failed copy %s failed: %s", keys.base, e)

    # -- fetch --------------------------------------------------------------------------

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        if start_position < 0:
            raise RemoteStorageException(f"start_position {start_position} < 0")
        if end_position is not None and end_position < start_position:
            raise RemoteStorageException(
                f"end_position {end_position} < start_position {start_position}"
            )
        self._touch_first(metadata, start_position)
        seg = self.open_segment(metadata)
        if start_position >= seg.size:
            return io.BytesIO(b"")
        end = seg.size - 1 if end_position is None else min(end_position, seg.size - 1)
        tip = metadata.topic_id_partition
        stream = ChunkStream(
            seg.manifest.chunk_index,
            start_position,
            end,
            load=lambda chunk_id: self._chunk(seg, chunk_id),
            ahead=lambda chunk_id: self._chunk_ahead(seg, chunk_id),
            arriving=lambda chunk_id: self._arriving_chunk(seg, chunk_id),
            pool=self._ahead_pool,
            law=self._law_for(tip) if self._read_ahead > 0 else None,
            budget=self.read_ahead_budget,
            reached=(
                (lambda chunk_id: self.chunk_cache.reached((seg.cache_id, chunk_id)))
                if self._caching_chunks
                else None
            ),
            grown=lambda: self._window_grown(tip),
            closed=lambda law: self._remember(tip, law),
        )
        if self._read_ahead > 0:
            with self._laws_lock:
                _keep(self._reading, tip, (seg.cache_id, weakref.ref(stream)))
        return stream  # type: ignore[return-value]

    def _warm_rank(self, tip: TopicIdPartition, cache_id: str, chunk_id: int) -> Callable[[], int]:
        """How far a warmed chunk is from its partition's reader, for the GET pool: past
        what is left of the segment the reader is in, or, once the reader has entered this
        segment, past its chunk there. Read without the lock (the pool holds its own)."""

        def rank() -> int:
            entry = self._reading.get(tip)
            stream = None if entry is None else entry[1]()
            if entry is None or stream is None:
                return chunk_id + 1
            if entry[0] == cache_id:
                return chunk_id - stream.reader_chunk
            return stream.chunks_left + chunk_id + 1

        return rank

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        self._touch_first(metadata, None)
        seg = self.open_segment(metadata)
        blob_range = seg.manifest.indexes.get(index_type)
        if blob_range is None:
            raise RemoteResourceNotFoundException(
                f"{seg.keys.base}: segment has no {INDEX_NAMES[index_type]} index"
            )
        if blob_range.size == 0:
            return io.BytesIO(b"")
        data = self.index_cache.get(
            (seg.cache_id, index_type.value), lambda: self._load_index(seg, index_type)
        )
        return io.BytesIO(data)

    def _load_index(self, seg: OpenSegment, index_type: IndexType) -> bytes:
        """One index: sliced from the ``.indexes`` blob a first touch fetched whole (the
        other indexes in it are cached on the way), else one ranged GET."""
        blob_range = seg.manifest.indexes[index_type]
        assert blob_range is not None  # fetch_index answered a missing index itself
        end = blob_range.position + blob_range.size
        blob = self._first_touch_result(seg.keys.indexes, pop=False)
        if isinstance(blob, bytes) and len(blob) >= end:
            for other, other_range in seg.manifest.indexes.items():
                if other is index_type or other_range is None or not other_range.size:
                    continue
                other_end = other_range.position + other_range.size
                if len(blob) >= other_end:
                    stored = blob[other_range.position : other_end]
                    self.index_cache.prefetch(
                        (seg.cache_id, other.value),
                        functools.partial(self._decrypt_index, seg, other, stored),
                    )
            with self._first_touch_lock:  # every index is cached or loading now
                self._first_touch.pop(seg.keys.indexes, None)
            return self._decrypt_index(seg, index_type, blob[blob_range.position : end])
        stored = self.backend.get_range(seg.keys.indexes, blob_range.position, end, "indexes")
        return self._decrypt_index(seg, index_type, stored)

    def _decrypt_index(self, seg: OpenSegment, index_type: IndexType, stored: bytes) -> bytes:
        if seg.data_key is None:
            return stored
        name = INDEX_NAMES[index_type]
        try:
            return decrypt(
                seg.data_key, stored, blob_aad(seg.data_key, name), f"{seg.keys.indexes} {name}"
            )
        except CorruptDataError:
            metrics.CORRUPT_CHUNKS.inc()
            raise

    # -- first touch --------------------------------------------------------------------

    def _touch_first(self, metadata: RemoteLogSegmentMetadata, position: int | None) -> None:
        """A read of a segment whose manifest is not cached (untouched since start, or
        evicted) GETs beside the manifest, instead of after it: for an index lookup
        (``position`` None) the whole ``.indexes`` blob, one GET for all the indexes instead
        of one each; for a stream starting in chunk 0, the stored bytes chunk 0 can occupy.
        The broker's reader looks the offset up while its stream starts, so a read at a
        segment's first batch has the manifest, the indexes and chunk 0 in flight at once.
        Both are checked against the manifest when it arrives, and used only if they cover
        what it says.

        An early GET is a claim in ``_first_touch``, taken under the lock and held until
        the read it serves takes it, which happens only once the manifest is resident. So
        under the lock "neither claimed nor resident" means no reader of this manifest
        load has fetched it: a reader that saw the manifest absent and was delayed before
        the lock, while another claimed and used chunk 0, finds the manifest resident and
        issues nothing. A manifest still loading is not enough to skip: the lookup and the
        stream of one read each claim their own early GET while it loads."""
        keys = self.keys_for(metadata)
        if self.manifest_cache.holds(keys.manifest):
            return
        cfg = self.config
        with self._first_touch_lock:
            if keys.manifest in self.manifest_cache:
                return
            if position is None and keys.indexes not in self._first_touch:
                self._first_touch[keys.indexes] = self._fetch_pool.submit(
                    self.backend.get, keys.indexes, "indexes"
                )
            if (
                position is not None
                and position < cfg.chunk_size
                and keys.log not in self._first_touch
            ):
                guess = min(cfg.chunk_size, metadata.segment_size_in_bytes)
                if cfg.encryption_enabled:
                    guess += ENCRYPTION_OVERHEAD
                arriving = Arriving(guess)
                future = self._fetch_pool.submit(
                    self.backend.get_range_view, keys.log, 0, guess, "log", arriving
                )
                # done, failed or cancelled before it ran: a reader waiting for bytes stops
                future.add_done_callback(lambda _: arriving.ended())
                self._first_touch[keys.log] = future
                self._arriving[keys.log] = arriving
            while len(self._first_touch) > _FIRST_TOUCH_KEPT:
                key, dropped = self._first_touch.popitem(last=False)
                self._arriving.pop(key, None)
                dropped.cancel()

    def _first_touch_result(self, key: str, *, pop: bool) -> object:
        """What the first touch fetched of ``key`` (None if nothing, or it failed)."""
        with self._first_touch_lock:
            if pop:
                future = self._first_touch.pop(key, None)
                self._arriving.pop(key, None)
            else:
                future = self._first_touch.get(key)
        if future is None or future.cancelled():
            return None
        try:
            return future.result()
        except Exception:  # the regular GET that follows reports the store's error
            return None

    def _forget_first_touch(self, keys: SegmentKeys) -> None:
        with self._first_touch_lock:
            self._arriving.pop(keys.log, None)
            for key in (keys.indexes, keys.log):
                future = self._first_touch.pop(key, None)
                if future is not None:
                    future.cancel()

    def warm(
        self, metadata: RemoteLogSegmentMetadata, start_position: int = 0, length: int | None = None
    ) -> int:
        """Prefetch ``[start_position, start_position + length)`` of a segment in the
        background (``length`` None: the read-ahead window), e.g. the next segment while a
        consumer reads the end of the current one: each chunk is kept in memory for the
        stream that reaches it (``warmed``) and written to the chunk cache. Returns the loads
        scheduled: chunks already cached or loading are skipped, so a caller may widen its
        window call by call without a chunk ever being fetched twice.

        A window starting at position 0 also prefetches the offset and time indexes: a
        reader entering the segment elsewhere than its first batch looks its position up
        there first, one object-store round trip each. ``length=0`` warms only the manifest
        (loaded here, in the calling thread) and those indexes.
        """
        if not self._caching_chunks:
            return 0
        if start_position == 0:
            self._touch_first(metadata, None)
        seg = self.open_segment(metadata)
        if start_position == 0:
            for index_type in (IndexType.OFFSET, IndexType.TIMESTAMP):
                if not self.index_cache.holds((seg.cache_id, index_type.value)):
                    self._fetch_pool.submit(self._warm_index, metadata, index_type)
        reach = self.read_ahead_bytes if length is None else length
        if start_position >= seg.size or reach <= 0:
            return 0
        end = min(seg.size - 1, start_position + reach - 1)
        scheduled = 0
        index = seg.manifest.chunk_index
        for chunk_id in index.chunks_for_range(start_position, end):
            key = (seg.cache_id, chunk_id)
            if key in self._warmed or self.chunk_cache.holds(key):
                continue
            first, last = index.original_range(chunk_id)
            if not self._warm_account.try_acquire(last - first):
                break  # the budget is spoken for: the stream loads it when it gets there
            # kept before the task can run, so a stream reaching the chunk meanwhile takes
            # this load instead of starting its own and leaving this one held for nothing
            load: Future[bytes | memoryview | None] = Future()
            self._warmed.add(key, load, last - first)
            try:
                tip = metadata.topic_id_partition
                self._ahead_pool.submit_ranked(
                    self._warm_rank(tip, seg.cache_id, chunk_id),
                    self._warm_into,
                    load,
                    seg,
                    chunk_id,
                    tip,
                )
            except RuntimeError:  # the pool is shut down: the plugin is closing
                self._warmed.take(key)  # cancels it and gives its budget back
                break
            scheduled += 1
        return scheduled

    def _warm_into(
        self,
        load: Future[bytes | memoryview | None],
        seg: OpenSegment,
        chunk_id: int,
        tip: TopicIdPartition,
    ) -> None:
        """Run one warm load unless a stream took (and so cancelled) it before it started."""
        if not load.set_running_or_notify_cancel():
            return
        try:
            load.set_result(self._warm_chunk(seg, chunk_id, tip))
        except BaseException as e:  # never leave a stream waiting on a load that ended
            load.set_exception(e)
            raise

    def _warm_chunk(
        self, seg: OpenSegment, chunk_id: int, tip: TopicIdPartition
    ) -> bytes | memoryview | None:
        """Load one chunk for the stream that will reach it (``warmed.WarmedChunks`` keeps
        it, and its budget, until then), written behind into the chunk cache for other
        readers; None if the load failed (the stream then loads it itself, and reports the
        error). A GET made here is one of the partition's read-ahead GETs for the window
        law's ``L``: a reader crossing segments whose chunks were all warmed would otherwise
        measure no GET at all, and size its window from a latency measured once."""
        started = time.monotonic()
        try:
            data, fetched = self._load_ahead(seg, chunk_id)
        except Exception as e:  # best effort: the reader loads it and reports the failure
            log.debug("warming chunk %d of %s failed: %r", chunk_id, seg.keys.log, e)
            return None
        if fetched:
            with self._laws_lock:
                law = self._laws.get(tip)
            if law is not None:
                law.got(time.monotonic() - started)
        return data

    def _warm_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> None:
        try:
            self.fetch_index(metadata, index_type).close()
        except Exception as e:  # best effort: the reader fetches it (and reports errors) itself
            log.debug("warming the %s index of %s failed: %r", index_type.name, metadata, e)

    def open_segment(self, metadata: RemoteLogSegmentMetadata) -> OpenSegment:
        """The segment's parsed manifest (cached); also used by the Spark read path."""
        keys = self.keys_for(metadata)
        return self.manifest_cache.get(keys.manifest, lambda: self._load_manifest(keys, metadata))

    def keys_for(self, metadata: RemoteLogSegmentMetadata) -> SegmentKeys:
        """Where the segment lives: the prefix recorded at upload time (custom metadata)
        wins over the current configuration, so changing the prefix orphans nothing."""
        cfg = self.config
        prefix, mask = cfg.key_prefix, cfg.key_prefix_mask
        if metadata.custom_metadata is not None and metadata.custom_metadata.value:
            try:
                location = SegmentLocation.decode(metadata.custom_metadata.value)
                prefix, mask = location.key_prefix, location.key_prefix_mask
            except ValueError:
                log.warning("ignoring undecodable custom metadata of %s", metadata)
        return segment_keys(prefix, mask, metadata)

    def _load_manifest(self, keys: SegmentKeys, metadata: RemoteLogSegmentMetadata) -> OpenSegment:
        raw = self.backend.get(keys.manifest, "manifest")
        try:
            manifest = SegmentManifest.from_json_bytes(raw)
        except ManifestError as e:
            raise RemoteStorageException(f"{keys.manifest}: {e}") from None
        recorded = describes(manifest.segment)
        if recorded is not None and recorded != describes(metadata_to_json(metadata)):
            # another segment's objects under this segment's keys (a bad restore or copy):
            # serving them would hand the consumer another partition's records
            metrics.CORRUPT_CHUNKS.inc()
            raise CorruptDataError(
                f"{keys.manifest} belongs to another segment: it records {recorded}"
            )
        data_key = None
        if manifest.encryption is not None:
            if self.keyring is None:
                raise RemoteStorageException(
                    f"{keys.manifest} is encrypted but no key ring is configured"
                )
            key = self.keyring.unwrap(manifest.encryption.key_id, manifest.encryption.wrapped_key)
            data_key = DataKey(key, manifest.encryption.aad)
        return OpenSegment(
            keys,
            manifest,
            data_key,
            ChunkDecoder(
                data_key,
                keys.log,
                None if self.backend.direct is None else self.backend.direct.buffers.lease,
            ),
            f"{keys.base}#{manifest.upload_id}",
        )

    def _chunk(self, seg: OpenSegment, chunk_id: int) -> bytes | memoryview:
        key = (seg.cache_id, chunk_id)
        warmed = self._warmed.take(key)
        if warmed is not None:
            self.chunk_cache.reached(key)
            return warmed
        return self.chunk_cache.get(key, lambda: self._load_chunk(seg, chunk_id))

    def _arriving_chunk(self, seg: OpenSegment, chunk_id: int) -> Arriving | None:
        """A GET of a stream's first chunk whose bytes the stream can serve as they come,
        if the chunk is stored as is (no compression, no encryption) and neither cached nor
        warmed: the early GET of chunk 0 on a segment's first touch when it covers the
        chunk, or else one started now (``_load_arriving``). A reader entering a segment
        whose manifest is already resident (warmed for it, or read before) then waits for
        its first batch, not for the whole first chunk: traced after a restart, such reads
        answered after 64-75 ms, the whole 4 MiB GET through the bench's +50 ms proxy."""
        if seg.data_key is not None or seg.manifest.is_compressed(chunk_id):
            return None
        key = (seg.cache_id, chunk_id)
        if self.chunk_cache.holds(key) or key in self._warmed:
            return None
        if chunk_id == 0:
            with self._first_touch_lock:
                arriving = self._arriving.get(seg.keys.log)
            if arriving is not None:
                if arriving.length >= seg.manifest.chunk_index.stored_range(0)[1]:
                    return arriving
                return None  # the early GET is short: the chunk is loaded the ordinary way
        if not self._caching_chunks:
            return None  # the chunk would be fetched again when the stream takes it
        return self._load_arriving(seg, chunk_id)

    def _load_arriving(self, seg: OpenSegment, chunk_id: int) -> Arriving | None:
        """Load the chunk into the chunk cache on the fetch pool, its GET announcing its
        bytes in the returned ``Arriving``, whose ``outcome`` the stream takes the chunk (or
        the load's error) from once the GET has ended. A load of it already in flight is
        joined, and the ``Arriving`` then only ends."""
        start, end = seg.manifest.chunk_index.stored_range(chunk_id)
        arriving = Arriving(end - start)
        key = (seg.cache_id, chunk_id)
        try:
            future = self._fetch_pool.submit(
                self.chunk_cache.get, key, lambda: self._load_chunk(seg, chunk_id, arriving)
            )
        except RuntimeError:  # the pool is shut down: the plugin is closing
            return None
        arriving.outcome = future
        # done, failed or cancelled before it ran: the stream waiting for bytes stops
        future.add_done_callback(lambda _: arriving.ended())
        return arriving

    def _chunk_ahead(self, seg: OpenSegment, chunk_id: int) -> tuple[bytes | memoryview, bool]:
        """Read-ahead task: the chunk for the stream to keep until its reader gets there,
        also kept by the chunk cache (if any) for other readers; and whether this task
        fetched it (not found cached or already loading), so its time is a GET's."""
        if not self._caching_chunks:
            metrics.PREFETCH_CHUNKS.inc()
            return self._chunk(seg, chunk_id), True
        warmed = self._warmed.take((seg.cache_id, chunk_id))
        if warmed is not None:
            return warmed, False
        return self._load_ahead(seg, chunk_id)

    def _load_ahead(self, seg: OpenSegment, chunk_id: int) -> tuple[bytes | memoryview, bool]:
        """``chunk_cache.load_ahead`` of the chunk, and whether this call made its GET (not
        found cached, nor joined to a load already in flight)."""
        fetched = False

        def load() -> bytes | memoryview:
            nonlocal fetched
            fetched = True
            return self._load_chunk(seg, chunk_id)

        data = self.chunk_cache.load_ahead((seg.cache_id, chunk_id), load)
        return data, fetched

    def _load_chunk(
        self, seg: OpenSegment, chunk_id: int, arriving: Arriving | None = None
    ) -> bytes | memoryview:
        index = seg.manifest.chunk_index
        start, end = index.stored_range(chunk_id)
        original_start, original_end = index.original_range(chunk_id)
        early = self._first_touch_result(seg.keys.log, pop=True) if chunk_id == 0 else None
        if isinstance(early, memoryview) and len(early) >= end:
            stored = early[:end]
        else:
            stored = self.backend.get_range_view(seg.keys.log, start, end, "log", arriving)
        try:
            return seg.decoder.decode(
                chunk_id,
                stored,
                seg.manifest.is_compressed(chunk_id),
                original_end - original_start,
            )
        except CorruptDataError:
            metrics.CORRUPT_CHUNKS.inc()
            raise

    # -- delete -------------------------------------------------------------------------

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        keys = self.keys_for(metadata)
        self.backend.delete_many(keys.all())
        self.manifest_cache.invalidate(keys.manifest)
        metrics.SEGMENT_DELETES.inc()

    # -- inventory ----------------------------------------------------------------------

    def location(self) -> str:
        return self.config.storage_url

    def list_objects(self, page_size: int = 1000) -> Iterator[list[StoredObject]]:
        """Everything under the configured key prefix, one store request per page."""
        for page in self.backend.list_pages(self.config.key_prefix, page_size):
            yield [StoredObject(key, size) for key, size in page]

    def identify(self, key: str) -> SegmentObject | None:
        return identify_key(key)

    def segment_key(self, metadata: RemoteLogSegmentMetadata) -> str:
        return self.keys_for(metadata).base

    def required_keys(self, metadata: RemoteLogSegmentMetadata) -> list[str]:
        """All three objects: the manifest locates the other two."""
        return self.keys_for(metadata).all()

    def metadata_sizes(self, metadata: RemoteLogSegmentMetadata) -> Mapping[ObjectKind, int]:
        """None: the objects are transformed, so the manifest records their sizes."""
        return {}

    def recorded_size(self, metadata: RemoteLogSegmentMetadata) -> int | None:
        """From the custom metadata written at upload (when enabled)."""
        if metadata.custom_metadata is None:
            return None
        try:
            return SegmentLocation.decode(metadata.custom_metadata.value).stored_size
        except ValueError:
            return None

    def has_object(self, key: str) -> bool:
        return self.backend.head(key) is not None

    def delete_objects(self, keys: Sequence[str]) -> None:
        self.backend.delete_many(list(keys))

    def read_manifest(self, key: str) -> ManifestContents:
        manifest = SegmentManifest.from_json_bytes(self.backend.get(key, "manifest"))
        return ManifestContents(
            metadata_from_json(manifest.segment),
            {
                ObjectKind.LOG: manifest.chunk_index.stored_size,
                ObjectKind.INDEX: manifest.indexes_stored_size,
            },
        )

    def found_at(
        self, metadata: RemoteLogSegmentMetadata, manifest_key: str, stored_size: int
    ) -> RemoteLogSegmentMetadata:
        """Custom metadata naming the prefix the manifest was found under (hash directory
        included, mask 0), which ``keys_for`` prefers to the configuration."""
        found = identify_key(manifest_key)
        if found is None:
            return metadata
        at = found.segment_key.rfind(partition_dir(metadata.topic_id_partition))
        if at < 0:
            return metadata
        location = SegmentLocation(found.segment_key[:at], 0, stored_size)
        return replace(metadata, custom_metadata=CustomMetadata(location.encode()))
