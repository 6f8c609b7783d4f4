"""Prometheus metrics of the object-store plugin, registered once per process.

Several plugin instances may live in one process (tests, tools), so the collectors are
module-level singletons shared by all of them; labels say which operation, cache or
object type a sample belongs to. Names are prefixed ``tierlog_objectstore_``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUESTS = Counter(
    "tierlog_objectstore_requests",
    "Object-store requests issued, by operation.",
    ["operation"],
)
REQUEST_SECONDS = Histogram(
    "tierlog_objectstore_request_seconds",
    "Object-store request latency (including the client's own retries), by operation.",
    ["operation"],
    buckets=_LATENCY_BUCKETS,
)
REQUEST_ERRORS = Counter(
    "tierlog_objectstore_request_errors",
    "Failed object-store requests by operation and error class "
    "(not_found, throttled, server, timeout, io, other).",
    ["operation", "error_class"],
)
UPLOAD_BYTES = Counter(
    "tierlog_objectstore_upload_bytes",
    "Bytes written to the object store, by object type (log, indexes, manifest).",
    ["object_type"],
)
FETCH_BYTES = Counter(
    "tierlog_objectstore_fetch_bytes",
    "Bytes read from the object store, by object type.",
    ["object_type"],
)
SEGMENT_COPY_SECONDS = Histogram(
    "tierlog_objectstore_segment_copy_seconds",
    "Wall time of copy_log_segment_data (all three objects).",
    buckets=(*_LATENCY_BUCKETS, 60.0, 120.0),
)
SEGMENT_DELETES = Counter(
    "tierlog_objectstore_segment_deletes",
    "Segments deleted (idempotent deletes of missing segments included).",
)
CORRUPT_CHUNKS = Counter(
    "tierlog_objectstore_corrupt_data",
    "Chunks or indexes that failed authentication or decompression.",
)
CACHE_HITS = Counter("tierlog_objectstore_cache_hits", "Cache hits, by cache.", ["cache"])
CACHE_MISSES = Counter(
    "tierlog_objectstore_cache_misses", "Cache misses (loads started), by cache.", ["cache"]
)
CACHE_EVICTIONS = Counter(
    "tierlog_objectstore_cache_evictions",
    "Cache evictions, by cache and cause (size, expired, invalidated).",
    ["cache", "cause"],
)
CACHE_LOAD_FAILURES = Counter(
    "tierlog_objectstore_cache_load_failures",
    "Cache loads that failed (never cached), by cache.",
    ["cache"],
)
CACHE_STORE_FAILURES = Counter(
    "tierlog_objectstore_cache_store_failures",
    "Loaded values the cache could not keep (disk full or failing); served uncached.",
    ["cache"],
)
CACHE_BYTES = Gauge("tierlog_objectstore_cache_bytes", "Bytes currently held, by cache.", ["cache"])
PREFETCH_CHUNKS = Counter(
    "tierlog_objectstore_prefetch_chunks",
    "Chunks loaded ahead of the reader (prefetch and in-stream read-ahead).",
)
PREFETCH_HITS = Counter(
    "tierlog_objectstore_prefetch_hits",
    "Reads served by a chunk that was loaded ahead of the reader.",
)
READ_AHEAD_BYTES = Gauge(
    "tierlog_objectstore_read_ahead_bytes",
    "Bytes of read-ahead held now (in flight or loaded, not yet reached by a reader), "
    "against fetch.chunk.cache.prefetch.total.max.size.",
)
READ_AHEAD_DENIED = Counter(
    "tierlog_objectstore_read_ahead_denied",
    "Read-ahead chunks not issued because the stream had its share of the budget.",
)
READ_AHEAD_WINDOW_BYTES = Gauge(
    "tierlog_objectstore_read_ahead_window_bytes",
    "Sum of the adaptive read-ahead windows of the open read streams.",
)
READ_AHEAD_STREAMS = Gauge(
    "tierlog_objectstore_read_ahead_streams",
    "Open read streams with read-ahead.",
)
READ_WAIT_SECONDS = Counter(
    "tierlog_objectstore_read_wait_seconds",
    "Time readers waited for the chunk they entered (not yet loaded by read-ahead).",
)
DIRECT_GET_FALLBACKS = Counter(
    "tierlog_objectstore_direct_get_fallbacks",
    "Chunk GETs that went to obstore instead of a reused buffer, by reason (no_buffer: the"
    " pool was empty; error: the direct GET failed and obstore repeated it).",
    ["reason"],
)
