"""The object store as the plugin sees it: ranged GETs, streamed multipart PUTs, bulk
deletes and listings over one obstore client, with metrics and error translation.

obstore runs requests on its own Rust runtime and releases the GIL while blocking, so the
synchronous calls here are safe to make from the broker's worker threads and from our
fetch pool.

Ranged GETs (the chunks of a cold read) go through obstore's async call instead, run on
one small event loop thread the backend owns (``_GetLoop``), while the caller still blocks
for the result. obstore's synchronous call polls the response body on the calling thread,
so every body frame the runtime receives wakes that thread: about 200 thread wake-ups per
4 MiB chunk, most of the CPU a GET costs on this path. Run as a task of the runtime, the
body is collected where it is received, and the caller is woken once, when the chunk is
complete. Multipart uploads take an iterator of buffers: obstore cuts it into parts of
``part_size`` and keeps at most ``max_concurrency`` parts in flight, so memory stays at
about ``part_size * (max_concurrency + 1)`` per upload; on any error (including one raised
by our iterator) it aborts the multipart upload before re-raising.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import obstore
from obstore import Bytes
from obstore.store import AzureStore, GCSStore, LocalStore, MemoryStore, ObjectStore, S3Store

from tierlog.storage.objectstore import metrics
from tierlog.storage.objectstore.arriving import Arriving
from tierlog.storage.objectstore.buffers import ChunkBuffers
from tierlog.storage.objectstore.cache import PENDING_WRITES
from tierlog.storage.objectstore.config import ObjectStoreConfig
from tierlog.storage.objectstore.direct_get import DirectRangeReader
from tierlog.storage.objectstore.errors import ObjectStoreConfigError, classify, translate
from tierlog.storage.objectstore.transform import ENCRYPTION_OVERHEAD
from tierlog.tiered.api import RemoteResourceNotFoundException, RemoteStorageException

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Backends with a bulk delete request.
_BULK_DELETE_SCHEMES = ("s3", "az")


class ObjectBackend:
    def __init__(
        self,
        store: ObjectStore,
        scheme: str,
        *,
        part_size: int,
        max_concurrency: int,
        direct: DirectRangeReader | None = None,
    ) -> None:
        self.store = store
        self.scheme = scheme
        self.part_size = part_size
        self.max_concurrency = max_concurrency
        #: Per-instance request counts by operation (the Prometheus counters are global).
        self.request_counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self._gets = _GetLoop()
        #: Chunk GETs received into reused buffers (``direct_get``); None: all go to obstore.
        self.direct = direct

    def close(self) -> None:
        """Stop the GET loop; a ranged GET after this raises ``RemoteStorageException``."""
        if self.direct is not None:
            self.direct.close()
        self._gets.close()

    @classmethod
    def from_config(cls, cfg: ObjectStoreConfig) -> ObjectBackend:
        try:
            store = build_store(cfg)
        except Exception as e:
            raise ObjectStoreConfigError(
                f"storage.url={cfg.storage_url!r}: cannot create the store client: {e}"
            ) from e
        return cls(
            store,
            cfg.scheme,
            part_size=cfg.upload_part_size,
            max_concurrency=cfg.upload_max_concurrency,
            direct=direct_reader(store, cfg),
        )

    # -- reads --------------------------------------------------------------------------

    def get_range(self, key: str, start: int, end: int, object_type: str = "log") -> bytes:
        """Bytes [start, end) of ``key`` in one ranged GET."""
        if end <= start:
            return b""
        data = self._call("get_range", key, functools.partial(self._get_range, key, start, end))
        raw = data.to_bytes()
        metrics.FETCH_BYTES.labels(object_type).inc(len(raw))
        return raw

    def get_range_view(
        self,
        key: str,
        start: int,
        end: int,
        object_type: str = "log",
        arriving: Arriving | None = None,
    ) -> memoryview:
        """Bytes [start, end) of ``key`` in one ranged GET, as a read-only view of the
        client's own receive buffer: a 4 MiB chunk is not copied into a Python ``bytes``
        before it is decoded or written to the disk cache. With ``arriving``, a GET received
        into a pool slot announces its bytes there as they come (the caller tells it when
        the GET has ended)."""
        if end <= start:
            return memoryview(b"")
        view = self._call(
            "get_range", key, functools.partial(self._get_view, key, start, end, arriving)
        )
        metrics.FETCH_BYTES.labels(object_type).inc(len(view))
        return view

    def _get_view(
        self, key: str, start: int, end: int, arriving: Arriving | None = None
    ) -> memoryview:
        """Into a reused buffer where one is free and the direct path works; any failure
        there is repeated through obstore, whose retries and errors are the contract."""
        if self.direct is not None:
            try:
                view = self.direct.get_into(key, start, end, arriving)
            except Exception as e:
                metrics.DIRECT_GET_FALLBACKS.labels("error").inc()
                log.debug(
                    "direct GET %s [%d, %d) failed, retried by obstore: %r", key, start, end, e
                )
            else:
                if view is not None:
                    return view
                metrics.DIRECT_GET_FALLBACKS.labels("no_buffer").inc()
        return memoryview(self._get_range(key, start, end))

    def _get_range(self, key: str, start: int, end: int) -> Bytes:
        return self._gets.get_range(self.store, key, start, end)

    def get(self, key: str, object_type: str = "manifest") -> bytes:
        def op() -> bytes:
            return obstore.get(self.store, key).bytes().to_bytes()

        raw = self._call("get", key, op)
        metrics.FETCH_BYTES.labels(object_type).inc(len(raw))
        return raw

    def head(self, key: str) -> int | None:
        """Size of ``key``, or None if it does not exist."""
        try:
            meta = self._call("head", key, lambda: obstore.head(self.store, key))
        except RemoteResourceNotFoundException:
            return None
        return int(meta["size"])

    def list_objects(self, prefix: str) -> Iterator[tuple[str, int]]:
        """(key, size) of every object under ``prefix``."""
        for page in self.list_pages(prefix):
            yield from page

    def list_pages(self, prefix: str, page_size: int = 50) -> Iterator[list[tuple[str, int]]]:
        """(key, size) of every object under ``prefix``, one page of at most ``page_size`` at
        a time, as the store returns them (in no promised order)."""
        # lazy: no request yet
        stream = iter(obstore.list(self.store, prefix or None, chunk_size=page_size))
        while True:
            # each page is a request of its own: its failure is a store error like any other
            batch = self._call("list", prefix, lambda: next(stream, None))
            if batch is None:
                return
            yield [(str(meta["path"]), int(meta["size"])) for meta in batch]

    # -- writes -------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes, object_type: str) -> None:
        self._call(
            "put",
            key,
            lambda: obstore.put(self.store, key, data, use_multipart=False),
        )
        metrics.UPLOAD_BYTES.labels(object_type).inc(len(data))

    def put_stream(self, key: str, chunks: Iterable[bytes], object_type: str) -> int:
        """Multipart upload of the concatenated chunks; returns the bytes written."""
        written = 0

        def counting() -> Iterator[bytes]:
            nonlocal written
            for chunk in chunks:
                written += len(chunk)
                metrics.UPLOAD_BYTES.labels(object_type).inc(len(chunk))
                yield chunk

        self._call(
            "put_multipart",
            key,
            lambda: obstore.put(
                self.store,
                key,
                counting(),
                use_multipart=True,
                chunk_size=self.part_size,
                max_concurrency=self.max_concurrency,
            ),
        )
        return written

    def put_file(self, key: str, path: Path, object_type: str) -> int:
        """Upload a local file as-is, read by the client itself (no Python in the loop)."""
        size = path.stat().st_size
        self._call(
            "put_multipart" if size > self.part_size else "put",
            key,
            lambda: obstore.put(
                self.store,
                key,
                path,
                chunk_size=self.part_size,
                max_concurrency=self.max_concurrency,
            ),
        )
        metrics.UPLOAD_BYTES.labels(object_type).inc(size)
        return size

    def delete_many(self, keys: list[str]) -> None:
        """Delete ``keys``; missing keys are not an error.

        S3 deletes up to 1000 keys per request and ignores missing ones. Azure deletes in
        one batch request too, but the batch fails on a missing key, so it then falls back
        to key by key. Other stores go key by key, treating "not found" as done.
        """
        if not keys:
            return
        if self.scheme in _BULK_DELETE_SCHEMES:
            try:
                self._call("delete_batch", keys[0], lambda: obstore.delete(self.store, keys))
                return
            except RemoteResourceNotFoundException:
                if self.scheme == "s3":
                    return
        for key in keys:
            try:
                self._call("delete", key, functools.partial(obstore.delete, self.store, key))
            except RemoteResourceNotFoundException:
                pass

    # -- plumbing -----------------------------------------------------------------------

    def _call(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        with self._counts_lock:
            self.request_counts[operation] += 1
        metrics.REQUESTS.labels(operation).inc()
        started = time.perf_counter()
        try:
            return fn()
        except RemoteStorageException:
            # Raised by our own upload iterator (e.g. the local file vanished): not a store
            # error, and obstore has already aborted the multipart upload.
            metrics.REQUEST_ERRORS.labels(operation, "local").inc()
            raise
        except Exception as e:
            metrics.REQUEST_ERRORS.labels(operation, classify(e)).inc()
            raise translate(e, f"{operation} {key}") from e
        finally:
            metrics.REQUEST_SECONDS.labels(operation).observe(time.perf_counter() - started)


class _GetLoop:
    """One event loop thread on which ranged GETs run as obstore's async calls, for
    callers that block on them (see the module doc). Started by the first GET, stopped by
    ``close``, which cancels the GETs still in flight (their callers get the error); the
    loop only starts requests and hands back results, so one thread serves every GET."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def get_range(self, store: ObjectStore, key: str, start: int, end: int) -> Bytes:
        done = asyncio.run_coroutine_threadsafe(
            _get_range(store, key, start, end), self._running(key)
        )
        return done.result()

    def _running(self, key: str) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise RemoteStorageException(f"get_range {key}: the object store is closed")
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="tierlog-rsm-get-loop", daemon=True
                )
                self._thread.start()
            return self._loop

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_cancel_others(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _cancel_others() -> None:
    me = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is not me:
            task.cancel()


async def _get_range(store: ObjectStore, key: str, start: int, end: int) -> Bytes:
    return await obstore.get_range_async(store, key, start=start, end=end)


#: Environment variables that route HTTP through a proxy: obstore's client follows them and
#: ``http.client`` does not, so the direct path stays off where one is set.
_PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


def direct_reader(store: ObjectStore, cfg: ObjectStoreConfig) -> DirectRangeReader | None:
    """The direct chunk-GET path for ``cfg``, or None where it is off: not configured, a
    store without presigned URLs (local, memory), or a proxy that only obstore's client
    would honour."""
    if not cfg.fetch_direct_get_enabled or not isinstance(store, (S3Store, GCSStore, AzureStore)):
        return None
    if any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return None
    slot = cfg.chunk_size + (ENCRYPTION_OVERHEAD if cfg.encryption_enabled else 0)
    buffers = ChunkBuffers(slot, buffer_slots(cfg, slot))
    return DirectRangeReader(store, buffers, cfg.request_timeout_ms / 1000)


def buffer_slots(cfg: ObjectStoreConfig, slot: int) -> int:
    """Slots for every holder of received chunks at once: read-ahead (its budget), the
    fetch pool's GETs, and the chunk cache, whose memory class keeps the chunks it caches
    in their slots (up to its size) and whose disk class keeps those queued for its writer.
    A pool smaller than that sends GETs to obstore while slots sit in the cache. With
    transforms, a chunk is decoded into a second slot before its received one is free
    again (``ChunkDecoder``): one more slot for every GET that can be decoding at once.
    Slots are backed by memory only once used, so the unused ones cost address space."""
    gets = -(-cfg.fetch_chunk_cache_prefetch_total_max_size // slot) + cfg.fetch_thread_pool_size
    slots = gets
    if cfg.compression_enabled or cfg.encryption_enabled:
        slots += gets
    if cfg.fetch_chunk_cache_class == "memory":
        slots += -(-cfg.fetch_chunk_cache_size // slot)
    elif cfg.fetch_chunk_cache_class == "disk":
        slots += PENDING_WRITES
    return max(slots, 1)


def build_store(cfg: ObjectStoreConfig) -> ObjectStore:
    client: dict[str, Any] = {
        "timeout": timedelta(milliseconds=cfg.request_timeout_ms),
        "connect_timeout": timedelta(milliseconds=cfg.connect_timeout_ms),
    }
    retry: dict[str, Any] = {
        "max_retries": cfg.retry_max,
        "retry_timeout": timedelta(milliseconds=cfg.retry_timeout_ms),
    }
    options = dict(cfg.store_options)
    endpoint = options.get("endpoint", "")
    if endpoint.startswith("http://") or options.pop("allow_http", "") == "true":
        client["allow_http"] = True
    if cfg.scheme == "file":
        Path(cfg.bucket).mkdir(parents=True, exist_ok=True)
        return LocalStore(cfg.bucket)
    if cfg.scheme == "memory":
        return MemoryStore()
    config: Any = options
    if cfg.scheme == "s3":
        return S3Store(cfg.bucket, config=config, client_options=client, retry_config=retry)  # type: ignore[arg-type]
    if cfg.scheme == "gs":
        return GCSStore(cfg.bucket, config=config, client_options=client, retry_config=retry)  # type: ignore[arg-type]
    if cfg.scheme == "az":
        return AzureStore(cfg.bucket, config=config, client_options=client, retry_config=retry)  # type: ignore[arg-type]
    raise ValueError(f"unsupported scheme {cfg.scheme!r}")
