"""Writes the ``.log`` and ``.indexes`` objects of one segment.

The log is read chunk by chunk and streamed: chunk transforms run a few chunks ahead on
the transform pool (zstd and AES release the GIL, so they use more than one core), the
token bucket paces what goes out, and obstore uploads parts concurrently. At any time one
upload holds at most ``transform_ahead`` chunks plus obstore's in-flight parts, whatever
the segment size. A segment that fits in one part is sent with a single PUT.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.storage.objectstore.chunk_index import ChunkIndex
from tierlog.storage.objectstore.errors import LocalReadError
from tierlog.storage.objectstore.manifest import INDEX_NAMES, BlobRange
from tierlog.storage.objectstore.ratelimit import TokenBucket
from tierlog.storage.objectstore.transform import (
    BatchCompressionScanner,
    ChunkEncoder,
    DataKey,
    EncodedChunk,
    blob_aad,
    encrypt,
)
from tierlog.tiered.api import IndexType, LogSegmentData


@dataclass(frozen=True)
class LogUpload:
    chunk_index: ChunkIndex
    #: Per-chunk compression flags; None when compression is off for the segment.
    compressed: list[bool] | None


@dataclass(frozen=True)
class IndexesUpload:
    ranges: dict[IndexType, BlobRange | None]
    stored_size: int


class SegmentUploader:
    def __init__(
        self,
        backend: ObjectBackend,
        *,
        chunk_size: int,
        compression: bool,
        compression_heuristic: bool,
        compression_level: int,
        rate_limiter: TokenBucket | None,
        transform_pool: Executor,
        transform_ahead: int,
    ) -> None:
        self._backend = backend
        self._chunk_size = chunk_size
        self._compression = compression
        self._heuristic = compression_heuristic
        self._level = compression_level
        self._rate = rate_limiter
        self._pool = transform_pool
        self._ahead = max(1, transform_ahead)

    def upload_log(self, key: str, path: Path, data_key: DataKey | None) -> LogUpload:
        size = _file_size(path)
        if not self._compression and data_key is None and self._rate is None:
            self._backend.put_file(key, path, "log")
            count = -(-size // self._chunk_size)
            sizes = [self._chunk_size] * count
            if count:
                sizes[-1] = size - self._chunk_size * (count - 1)
            return LogUpload(ChunkIndex.from_stored_sizes(self._chunk_size, size, sizes), None)
        stored_sizes: list[int] = []
        flags: list[bool] = []
        chunks = self._encoded_chunks(path, size, data_key, stored_sizes, flags)
        if size <= self._backend.part_size:
            self._backend.put_bytes(key, b"".join(chunks), "log")
        else:
            self._backend.put_stream(key, chunks, "log")
        index = ChunkIndex.from_stored_sizes(self._chunk_size, size, stored_sizes)
        return LogUpload(index, flags if self._compression else None)

    def upload_indexes(
        self, key: str, data: LogSegmentData, data_key: DataKey | None
    ) -> IndexesUpload:
        """All indexes in one blob, each encrypted on its own so it can be fetched alone.

        Indexes are bounded by ``segment.index.bytes`` (10 MiB by default), so each is held
        in memory while it is encrypted.
        """
        sources: dict[IndexType, Path | bytes | None] = {
            IndexType.OFFSET: data.offset_index,
            IndexType.TIMESTAMP: data.time_index,
            IndexType.PRODUCER_SNAPSHOT: data.producer_snapshot_index,
            IndexType.TRANSACTION: data.transaction_index,
            IndexType.LEADER_EPOCH: data.leader_epoch_index,
        }
        ranges: dict[IndexType, BlobRange | None] = {}
        pieces: list[bytes] = []
        position = 0
        for index_type, source in sources.items():
            if source is None:
                ranges[index_type] = None
                continue
            raw = source if isinstance(source, bytes) else _read_file(source)
            if data_key is not None and raw:
                raw = encrypt(data_key, raw, blob_aad(data_key, INDEX_NAMES[index_type]))
            ranges[index_type] = BlobRange(position, len(raw))
            position += len(raw)
            pieces.append(raw)
        if self._rate is not None:
            self._rate.acquire(position)
        if position <= self._backend.part_size:
            self._backend.put_bytes(key, b"".join(pieces), "indexes")
        else:
            self._backend.put_stream(key, iter(pieces), "indexes")
        return IndexesUpload(ranges, position)

    def _encoded_chunks(
        self,
        path: Path,
        size: int,
        data_key: DataKey | None,
        stored_sizes: list[int],
        flags: list[bool],
    ) -> Iterator[bytes]:
        encoder = ChunkEncoder(compress=self._compression, level=self._level, data_key=data_key)
        with _open_local(path) as f:
            scanner = None
            if self._compression and self._heuristic:
                fd = f.fileno()
                scanner = BatchCompressionScanner(lambda pos, n: os.pread(fd, n, pos))
            pending: deque[Future[EncodedChunk]] = deque()
            chunk_id = 0
            position = 0
            while position < size or pending:
                while position < size and len(pending) < self._ahead:
                    chunk = _read_exact(f, min(self._chunk_size, size - position), path)
                    fraction = scanner.feed(position, chunk) if scanner is not None else 0.0
                    pending.append(self._pool.submit(encoder.encode, chunk_id, chunk, fraction))
                    chunk_id += 1
                    position += len(chunk)
                encoded = pending.popleft().result()
                stored_sizes.append(len(encoded.data))
                flags.append(encoded.compressed)
                if self._rate is not None:
                    self._rate.acquire(len(encoded.data))
                yield encoded.data


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as e:
        raise LocalReadError(f"cannot stat {path}: {e}") from e


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise LocalReadError(f"cannot read {path}: {e}") from e


def _open_local(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as e:
        raise LocalReadError(f"cannot open {path}: {e}") from e


def _read_exact(f: BinaryIO, n: int, path: Path) -> bytes:
    parts: list[bytes] = []
    remaining = n
    try:
        while remaining:
            piece = f.read(remaining)
            if not piece:
                raise LocalReadError(f"{path} shrank while being uploaded")
            parts.append(piece)
            remaining -= len(piece)
    except OSError as e:
        raise LocalReadError(f"cannot read {path}: {e}") from e
    return parts[0] if len(parts) == 1 else b"".join(parts)
