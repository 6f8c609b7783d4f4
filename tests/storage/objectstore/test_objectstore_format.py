"""Format pieces: chunk index, custom metadata, key layout, manifest, transforms."""

from __future__ import annotations

import gc
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.storage.objectstore.objectstore_helpers import (
    build_segment,
    record_batch,
    segment_metadata,
)
from tierlog.storage.objectstore.buffers import ChunkBuffers
from tierlog.storage.objectstore.chunk_index import ChunkIndex
from tierlog.storage.objectstore.custom_metadata import SegmentLocation
from tierlog.storage.objectstore.errors import CorruptDataError
from tierlog.storage.objectstore.layout import hash_dir, partition_dir, segment_keys
from tierlog.storage.objectstore.manifest import (
    BlobRange,
    EncryptionInfo,
    ManifestError,
    SegmentManifest,
    compressed_bitmap,
    metadata_from_json,
    metadata_to_json,
)
from tierlog.storage.objectstore.transform import (
    ENCRYPTION_OVERHEAD,
    BatchCompressionScanner,
    ChunkDecoder,
    ChunkEncoder,
    DataKey,
)
from tierlog.tiered.api import IndexType, RemoteLogSegmentState, TopicIdPartition


def test_chunk_index_fixed_round_trip_and_lookup() -> None:
    index = ChunkIndex.from_stored_sizes(100, 950, [128] * 9 + [78])
    doc = index.to_json()
    assert doc["type"] == "fixed"
    again = ChunkIndex.from_json(doc)
    assert again == index
    assert again.chunk_for_position(0) == 0
    assert again.chunk_for_position(949) == 9
    assert list(again.chunks_for_range(99, 201)) == [0, 1, 2]
    assert again.stored_range(9) == (9 * 128, 9 * 128 + 78)
    assert again.original_range(9) == (900, 950)


def test_chunk_index_packed_is_compact_and_binary_searchable() -> None:
    sizes = [4_000_000 - (i * 7919) % 900_000 for i in range(256)]  # 1 GiB in 4 MiB chunks
    index = ChunkIndex.from_stored_sizes(4 * 1024 * 1024, 256 * 4 * 1024 * 1024, sizes)
    doc = index.to_json()
    assert doc["type"] == "packed"
    assert len(doc["storedSizes"]) < 1100  # ~3 bytes per chunk, base64
    again = ChunkIndex.from_json(doc)
    assert again.stored_sizes() == sizes
    for chunk_id in (0, 1, 100, 255):
        start, end = again.stored_range(chunk_id)
        assert again.chunk_at_stored_position(start) == chunk_id
        assert again.chunk_at_stored_position(end - 1) == chunk_id


def test_chunk_index_rejects_a_count_that_does_not_match_the_file_size() -> None:
    doc = ChunkIndex.from_stored_sizes(100, 1000, [90, 91] * 5).to_json()
    doc["originalFileSize"] = 1200
    with pytest.raises(ValueError, match="entries"):
        ChunkIndex.from_json(doc)


def test_custom_metadata_fits_128_bytes_for_a_249_char_topic() -> None:
    md = segment_metadata(1 << 30, topic="t" * 249, start_offset=2**62)
    location = SegmentLocation("tiered/cluster-a/", 0xFFFFFFFF, 5 * 2**40)
    encoded = location.encode()
    assert len(encoded) <= 128
    assert SegmentLocation.decode(encoded) == location
    # Nothing of the topic goes into it: the keys derive from the metadata.
    assert segment_keys("tiered/cluster-a/", 0xFFFFFFFF, md).base.startswith("tiered/cluster-a/")


def test_layout_matches_kafka_style_names_and_hash_prefix_is_stable() -> None:
    tip = TopicIdPartition(uuid.UUID(int=1), "payments", 7)
    md = segment_metadata(10, tip=tip, start_offset=1234)
    keys = segment_keys("pre/", 0, md)
    assert keys.base.startswith("pre/payments-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-")
    assert keys.log.endswith(".log") and keys.manifest.endswith(".rsm-manifest")
    hashed = segment_keys("pre/", 0xFF, md)
    h = hash_dir(partition_dir(tip), 0xFF)
    assert len(h) == 3 and hashed.base == "pre/" + h + keys.base[len("pre/") :]
    # all segments of a partition share the hash directory
    other = segment_metadata(10, tip=tip, start_offset=9999)
    assert segment_keys("pre/", 0xFF, other).base.startswith("pre/" + h)


def test_long_topic_names_fit_one_path_component() -> None:
    tip = TopicIdPartition(uuid.uuid4(), "x" * 249, 0)
    first = partition_dir(tip).split("/")[0]
    assert len(first.encode()) <= 255
    assert first.endswith(partition_dir(TopicIdPartition(tip.topic_id, "x", 0)).split("/")[0][1:])


def test_manifest_round_trip_keeps_everything_a_reader_needs() -> None:
    md = segment_metadata(12345, topic="orders", start_offset=500)
    manifest = SegmentManifest(
        chunk_index=ChunkIndex.from_stored_sizes(100, 250, [60, 90, 40]),
        compressed_chunks=compressed_bitmap([True, False, True]),
        encryption=EncryptionInfo("k1", b"wrapped", b"a" * 32),
        indexes={
            IndexType.OFFSET: BlobRange(0, 10),
            IndexType.TIMESTAMP: BlobRange(10, 12),
            IndexType.PRODUCER_SNAPSHOT: BlobRange(22, 5),
            IndexType.TRANSACTION: None,
            IndexType.LEADER_EPOCH: BlobRange(27, 9),
        },
        indexes_stored_size=36,
        upload_id="u1",
        segment=metadata_to_json(md),
    )
    again = SegmentManifest.from_json_bytes(manifest.to_json_bytes())
    assert again == manifest
    assert [again.is_compressed(i) for i in range(3)] == [True, False, True]
    rebuilt = metadata_from_json(again.segment)
    assert rebuilt.remote_log_segment_id == md.remote_log_segment_id
    assert (rebuilt.start_offset, rebuilt.end_offset) == (500, 599)
    assert dict(rebuilt.segment_leader_epochs) == dict(md.segment_leader_epochs)
    assert rebuilt.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED


def test_manifest_with_unknown_version_is_rejected() -> None:
    raw = SegmentManifest(
        ChunkIndex.from_stored_sizes(10, 0, []), None, None, {}, 0, "u"
    ).to_json_bytes()
    with pytest.raises(ManifestError, match="version"):
        SegmentManifest.from_json_bytes(raw.replace(b'"version":1', b'"version":99'))


@pytest.mark.parametrize(
    "damage",
    [
        lambda doc: doc.update(segmentIndexes=[]),  # a list where an object belongs
        lambda doc: doc.update(compression="zstd"),
        lambda doc: doc["chunkIndex"].update(storedSizes="AAAA"),  # truncated packed sizes
        lambda doc: doc.update(objects=None),
    ],
    ids=["indexes-not-object", "compression-not-object", "truncated-sizes", "objects-null"],
)
def test_malformed_manifest_fields_are_manifest_errors(damage: Any) -> None:
    raw = SegmentManifest(
        ChunkIndex.from_stored_sizes(100, 250, [60, 90, 40]),
        compressed_bitmap([True, False, True]),
        None,
        {t: None for t in IndexType},
        0,
        "u",
    ).to_json_bytes()
    doc = json.loads(raw)
    damage(doc)
    with pytest.raises(ManifestError):
        SegmentManifest.from_json_bytes(json.dumps(doc).encode())


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("encrypt", [False, True])
def test_chunk_transform_round_trip(compress: bool, encrypt: bool) -> None:
    key = DataKey.generate() if encrypt else None
    chunk = b"kafka tiered storage " * 5000
    encoded = ChunkEncoder(compress=compress, level=3, data_key=key).encode(3, chunk, 0.0)
    assert encoded.compressed is compress
    if compress:
        assert len(encoded.data) < len(chunk) // 10
    decoded = ChunkDecoder(key, "seg").decode(3, encoded.data, encoded.compressed, len(chunk))
    assert decoded == chunk


@pytest.mark.parametrize(("compress", "encrypt"), [(True, False), (False, True), (True, True)])
def test_chunks_decode_into_leased_pool_buffers(compress: bool, encrypt: bool) -> None:
    """Decrypted and decompressed straight into slots of the chunk buffer pool: the result
    is a slot (the disk cache can write it from there) and the intermediate ones return."""
    key = DataKey.generate() if encrypt else None
    chunk = b"kafka tiered storage " * 5000
    encoded = ChunkEncoder(compress=compress, level=3, data_key=key).encode(3, chunk, 0.0)
    pool = ChunkBuffers(len(chunk) + ENCRYPTION_OVERHEAD, 4)
    stored = pool.lease(len(encoded.data))
    assert stored is not None
    stored[:] = encoded.data
    decoded = ChunkDecoder(key, "seg", pool.lease).decode(3, stored, encoded.compressed, len(chunk))
    assert isinstance(decoded, memoryview) and decoded == chunk
    assert pool.padded(decoded, len(chunk)) is not None  # the start of a pool slot
    del stored
    gc.collect()
    assert pool.leased == 1  # only the decoded chunk's slot is still held
    # with the pool empty the decoder allocates, as without one
    held = [pool.lease(1) for _ in range(3)]
    assert pool.lease(1) is None
    again = ChunkDecoder(key, "seg", pool.lease).decode(
        3, encoded.data, encoded.compressed, len(chunk)
    )
    assert again == chunk and not isinstance(again, memoryview)
    del held


def test_damaged_chunks_decoded_into_pool_buffers_fail_and_free_them() -> None:
    key = DataKey.generate()
    pool = ChunkBuffers(20_000, 4)
    encoded = ChunkEncoder(compress=True, level=3, data_key=key).encode(0, b"x" * 10_000, 0.0)
    tampered = bytearray(encoded.data)
    tampered[20] ^= 0x01
    with pytest.raises(CorruptDataError, match="authentication failed"):
        ChunkDecoder(key, "seg", pool.lease).decode(0, bytes(tampered), True, 10_000)
    frame = zstandard.ZstdCompressor().compress(b"z" * 10_000)
    for size, match in ((9_999, "more than 9999 bytes"), (10_001, "decoded to 10000 bytes")):
        with pytest.raises(CorruptDataError, match=match):  # the manifest disagrees
            ChunkDecoder(None, "seg", pool.lease).decode(0, frame, True, size)
    bad = bytearray(frame)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(CorruptDataError, match=r"zstd|decoded"):
        ChunkDecoder(None, "seg", pool.lease).decode(0, bytes(bad), True, 10_000)
    gc.collect()
    assert pool.leased == 0


def test_incompressible_chunk_is_stored_raw() -> None:
    chunk = os.urandom(100_000)
    encoded = ChunkEncoder(compress=True, level=3, data_key=None).encode(0, chunk, 0.0)
    assert encoded.compressed is False and encoded.data == chunk


def test_tampered_encrypted_chunk_fails_authentication() -> None:
    key = DataKey.generate()
    encoded = ChunkEncoder(compress=True, level=3, data_key=key).encode(0, b"x" * 1000, 0.0)
    tampered = bytearray(encoded.data)
    tampered[20] ^= 0x01
    with pytest.raises(CorruptDataError, match="authentication failed"):
        ChunkDecoder(key, "seg").decode(0, bytes(tampered), encoded.compressed, 1000)


def test_encrypted_chunk_cannot_be_moved_to_another_position() -> None:
    key = DataKey.generate()
    encoded = ChunkEncoder(compress=False, level=3, data_key=key).encode(4, b"y" * 500, 0.0)
    with pytest.raises(CorruptDataError):
        ChunkDecoder(key, "seg").decode(5, encoded.data, False, 500)


def test_bad_zstd_frame_is_a_corruption_error() -> None:
    frame = bytearray(zstandard.ZstdCompressor().compress(b"z" * 10_000))
    frame[len(frame) // 2] ^= 0xFF
    with pytest.raises(CorruptDataError, match=r"zstd|decoded"):
        ChunkDecoder(None, "seg").decode(0, bytes(frame), True, 10_000)


def test_scanner_measures_bytes_of_already_compressed_batches(tmp_path: Path) -> None:
    plain = b"".join(record_batch(i, b"p" * 1000) for i in range(10))
    zipped = b"".join(record_batch(10 + i, os.urandom(1000), codec=4) for i in range(10))
    data = plain + zipped
    chunk = 1500  # not aligned with batches, so headers straddle chunk boundaries

    def peek(pos: int, n: int) -> bytes:
        return data[pos : pos + n]

    scanner = BatchCompressionScanner(peek)
    fractions = [scanner.feed(p, data[p : p + chunk]) for p in range(0, len(data), chunk)]
    assert fractions[0] == 0.0
    assert fractions[-1] == 1.0
    boundary = len(plain) // chunk
    assert 0.0 < fractions[boundary] < 1.0


def test_heuristic_skips_compression_for_producer_compressed_segments(tmp_path: Path) -> None:
    data = build_segment(tmp_path / "s.log", 300_000, compressible=True, codec=4)
    scanner = BatchCompressionScanner(lambda pos, n: data[pos : pos + n])
    encoder = ChunkEncoder(compress=True, level=3, data_key=None)
    flags = []
    for i, pos in enumerate(range(0, len(data), 65536)):
        chunk = data[pos : pos + 65536]
        flags.append(encoder.encode(i, chunk, scanner.feed(pos, chunk)).compressed)
    assert flags == [False] * len(flags)  # compressible bytes, but flagged as compressed
