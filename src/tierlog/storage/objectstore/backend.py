"""The object store as the plugin sees it: ranged GETs, streamed multipart PUTs, bulk
deletes and listings over one obstore client, with metrics and error translation.

obstore runs requests on its own Rust runtime and releases the GIL while blocking, so the
synchronous calls here are safe to make from the broker's worker threads and from our
fetch pool. Multipart uploads take an iterator of buffers: obstore cuts it into parts of
``part_size`` and keeps at most ``max_concurrency`` parts in flight, so memory stays at
about ``part_size * (max_concurrency + 1)`` per upload; on any error (including one raised
by our iterator) it aborts the multipart upload before re-raising.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import obstore
from obstore.store import AzureStore, GCSStore, LocalStore, MemoryStore, ObjectStore, S3Store

from tierlog.storage.objectstore import metrics
from tierlog.storage.objectstore.config import ObjectStoreConfig
from tierlog.storage.objectstore.errors import ObjectStoreConfigError, classify, translate
from tierlog.tiered.api import RemoteResourceNotFoundException, RemoteStorageException

T = TypeVar("T")

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
    ) -> None:
        self.store = store
        self.scheme = scheme
        self.part_size = part_size
        self.max_concurrency = max_concurrency
        #: Per-instance request counts by operation (the Prometheus counters are global).
        self.request_counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()

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
        )

    # -- reads --------------------------------------------------------------------------

    def get_range(self, key: str, start: int, end: int, object_type: str = "log") -> bytes:
        """Bytes [start, end) of ``key`` in one ranged GET."""
        if end <= start:
            return b""
        data = self._call(
            "get_range",
            key,
            lambda: obstore.get_range(self.store, key, start=start, end=end),
        )
        raw = data.to_bytes()
        metrics.FETCH_BYTES.labels(object_type).inc(len(raw))
        return raw

    def get_range_view(
        self, key: str, start: int, end: int, object_type: str = "log"
    ) -> memoryview:
        """Bytes [start, end) of ``key`` in one ranged GET, as a read-only view of the
        client's own receive buffer: a 4 MiB chunk is not copied into a Python ``bytes``
        before it is decoded or written to the disk cache."""
        if end <= start:
            return memoryview(b"")
        data = self._call(
            "get_range",
            key,
            lambda: obstore.get_range(self.store, key, start=start, end=end),
        )
        view = memoryview(data)
        metrics.FETCH_BYTES.labels(object_type).inc(len(view))
        return view

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
