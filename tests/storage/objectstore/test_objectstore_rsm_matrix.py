"""Transform matrix: chunk size x compression x encryption x chunk cache x prefetch, with
byte-exact round trips of whole segments, ranges crossing chunk boundaries, and indexes."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.object_stores import KeyPairPaths
from tests.storage.objectstore.objectstore_helpers import (
    MiB,
    encryption_props,
    finished,
    make_rsm,
    segment_data,
    segment_metadata,
)
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.storage.objectstore.config import ObjectStoreConfig
from tierlog.tiered.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
)

SEGMENT_BYTES = 1_500_000 + 333  # not a multiple of any chunk size below
CHUNK_SIZES = [64 * 1024, 1 * MiB - 1]
MATRIX = list(
    itertools.product(CHUNK_SIZES, [False, True], [False, True], ["memory", "disk", "none"], [0, 3])
)


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> tuple[LogSegmentData, bytes]:
    return segment_data(tmp_path_factory.mktemp("seg"), SEGMENT_BYTES)


def _ranges(chunk: int, size: int) -> list[tuple[int, int | None]]:
    return [
        (0, None),  # whole segment
        (chunk - 10, 2 * chunk + 10),  # crosses two chunk boundaries
        (chunk, chunk),  # first byte of a chunk, one byte
        (chunk - 1, chunk),  # last byte of a chunk and first of the next
        (size - 5, None),  # tail
        (size - 5, size + 100),  # end beyond the segment is clamped
        (123, 456),
    ]


@pytest.mark.parametrize(("chunk", "compress", "encrypt", "cache", "prefetch_chunks"), MATRIX)
def test_round_trip(
    tmp_path: Path,
    segment: tuple[LogSegmentData, bytes],
    rsa_key_pair: Callable[[str], KeyPairPaths],
    chunk: int,
    compress: bool,
    encrypt: bool,
    cache: str,
    prefetch_chunks: int,
) -> None:
    lsd, data = segment
    props = {
        "storage.url": f"file://{tmp_path}/remote",
        "chunk.size": str(chunk),
        "compression.enabled": str(compress).lower(),
        "fetch.chunk.cache.class": cache,
        "fetch.chunk.cache.path": str(tmp_path / "cache"),
        "fetch.chunk.cache.size": str(4 * MiB),
        "fetch.chunk.cache.prefetch.max.size": str(prefetch_chunks * chunk),
        "upload.part.size": str(512 * 1024),  # several parts per segment
    }
    if encrypt:
        pair = rsa_key_pair("matrix")
        props |= encryption_props({"k1": (pair.public, pair.private)}, "k1")
    rsm = make_rsm(props)
    try:
        md = segment_metadata(len(data))
        custom = rsm.copy_log_segment_data(md, lsd)
        stored = finished(md, custom)
        for start, end in _ranges(chunk, len(data)):
            with rsm.fetch_log_segment(stored, start, end) as stream:
                got = stream.read()
            stop = len(data) if end is None else min(end + 1, len(data))
            assert got == data[start:stop], (start, end)
        with rsm.fetch_log_segment(stored, chunk - 3) as stream:  # small reads
            assert stream.read(5) == data[chunk - 3 : chunk + 2]
            assert stream.read(7) == data[chunk + 2 : chunk + 9]
        _check_indexes(rsm, stored, lsd)
        log_object = next((tmp_path / "remote").rglob("*.log")).read_bytes()
        if encrypt:
            assert data[:64] not in log_object
        elif compress:
            assert len(log_object) < len(data) // 2
        else:
            assert log_object == data
    finally:
        rsm.close()


def _check_indexes(
    rsm: ObjectStoreRemoteStorageManager, stored: RemoteLogSegmentMetadata, lsd: LogSegmentData
) -> None:
    fetch = rsm.fetch_index
    assert fetch(stored, IndexType.OFFSET).read() == lsd.offset_index.read_bytes()
    assert fetch(stored, IndexType.TIMESTAMP).read() == lsd.time_index.read_bytes()
    assert (
        fetch(stored, IndexType.PRODUCER_SNAPSHOT).read()
        == lsd.producer_snapshot_index.read_bytes()
    )
    assert lsd.transaction_index is not None
    assert fetch(stored, IndexType.TRANSACTION).read() == lsd.transaction_index.read_bytes()
    assert fetch(stored, IndexType.LEADER_EPOCH).read() == lsd.leader_epoch_index


def test_missing_transaction_index_is_not_found(tmp_path: Path) -> None:
    lsd, data = segment_data(tmp_path / "seg", 10_000, txn=False)
    rsm = make_rsm({"storage.url": f"file://{tmp_path}/remote"})
    md = segment_metadata(len(data))
    stored = finished(md, rsm.copy_log_segment_data(md, lsd))
    with pytest.raises(RemoteResourceNotFoundException, match="transaction"):
        rsm.fetch_index(stored, IndexType.TRANSACTION)
    assert rsm.fetch_index(stored, IndexType.OFFSET).read() == lsd.offset_index.read_bytes()
    rsm.close()


def test_default_config_is_valid_and_documented_defaults_hold() -> None:
    cfg = ObjectStoreConfig.from_props({"storage.url": "file:///tmp/x"})
    assert cfg.chunk_size == 4 * MiB
    assert cfg.key_prefix_mask == 0
    assert cfg.fetch_chunk_cache_class == "memory"
