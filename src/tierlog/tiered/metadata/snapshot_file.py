"""Per-metadata-partition snapshot files, so a restart replays only the topic's tail.

Beyond Kafka (which always replays ``__remote_log_metadata`` from the start). One file per
metadata partition, ``<dir>/<partition>.rlmm-snapshot``, holding one ``PartitionSnapshot``
per user partition, each with the metadata offset it covers. Files are replaced atomically
(temp file, fsync, rename, fsync of the directory) so a crash leaves either the old or the
new snapshot. A file that fails its checksum or cannot be decoded is ignored with a warning:
the topic is the source of truth and a full replay is always correct.

Layout: ``b"TLRS" version:u8 partition:i32 count:u32 (len:u32 record)* crc32:u32``, where
each record is a serialized ``PartitionSnapshot`` and the CRC covers everything before it.
"""

from __future__ import annotations

import logging
import struct
import zlib
from pathlib import Path

from tierlog.fsutil import atomic_write
from tierlog.tiered.api import TopicIdPartition
from tierlog.tiered.metadata.partition_snapshot import PartitionSnapshot
from tierlog.tiered.metadata.serde import MetadataSerdeError, deserialize, serialize

log = logging.getLogger(__name__)

MAGIC = b"TLRS"
VERSION = 0
_HEADER = struct.Struct(">4sBiI")
_U32 = struct.Struct(">I")


def snapshot_path(directory: Path, metadata_partition: int) -> Path:
    return directory / f"{metadata_partition}.rlmm-snapshot"


def write_snapshot(
    directory: Path, metadata_partition: int, entries: list[PartitionSnapshot]
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = bytearray(_HEADER.pack(MAGIC, VERSION, metadata_partition, len(entries)))
    for e in entries:
        rec = serialize(e)
        body += _U32.pack(len(rec))
        body += rec
    body += _U32.pack(zlib.crc32(body))
    final = snapshot_path(directory, metadata_partition)
    atomic_write(final, bytes(body))
    return final


def read_snapshot(
    directory: Path, metadata_partition: int
) -> dict[TopicIdPartition, PartitionSnapshot]:
    """Entries by ``TopicIdPartition``; empty when there is no usable snapshot."""
    path = snapshot_path(directory, metadata_partition)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        return _decode(data, metadata_partition)
    except (ValueError, struct.error) as e:
        log.warning("ignoring unusable metadata snapshot %s (full replay instead): %s", path, e)
        return {}


def _decode(data: bytes, metadata_partition: int) -> dict[TopicIdPartition, PartitionSnapshot]:
    if len(data) < _HEADER.size + _U32.size:
        raise ValueError("file too short")
    (crc,) = _U32.unpack_from(data, len(data) - _U32.size)
    if zlib.crc32(data[: -_U32.size]) != crc:
        raise ValueError("checksum mismatch")
    magic, version, partition, count = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"bad magic {magic!r}")
    if version != VERSION:
        raise MetadataSerdeError(f"unsupported snapshot file version {version}")
    if partition != metadata_partition:
        raise ValueError(f"file is for metadata partition {partition}")
    pos = _HEADER.size
    out: dict[TopicIdPartition, PartitionSnapshot] = {}
    for _ in range(count):
        (n,) = _U32.unpack_from(data, pos)
        pos += _U32.size
        rec = deserialize(data[pos : pos + n])
        pos += n
        if not isinstance(rec, PartitionSnapshot):
            raise ValueError(f"unexpected {type(rec).__name__} in snapshot file")
        out[rec.topic_id_partition] = rec
    return out
