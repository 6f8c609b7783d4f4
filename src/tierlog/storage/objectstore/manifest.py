"""The segment manifest: a versioned JSON document that makes a segment self-describing.

It holds everything needed to read the ``.log`` and ``.indexes`` objects (chunk index,
per-chunk compression flags, index positions, wrapped data key and AAD) and a copy of the
segment metadata, so a topic can be rebuilt from the bucket alone. The format is described
in docs/remote-format.md; readers reject versions they do not know.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tierlog.storage.objectstore.chunk_index import ChunkIndex
from tierlog.storage.objectstore.layout import kafka_uuid, parse_kafka_uuid
from tierlog.tiered.api import (
    IndexType,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

MANIFEST_VERSION = 1
FORMAT_NAME = "tierlog-rsm-segment"

#: Manifest names of the five indexes, in the order they are written to the blob.
INDEX_NAMES: dict[IndexType, str] = {
    IndexType.OFFSET: "offset",
    IndexType.TIMESTAMP: "timestamp",
    IndexType.PRODUCER_SNAPSHOT: "producerSnapshot",
    IndexType.TRANSACTION: "transaction",
    IndexType.LEADER_EPOCH: "leaderEpoch",
}


class ManifestError(ValueError):
    """The manifest cannot be parsed or has an unsupported version."""


@dataclass(frozen=True, slots=True)
class BlobRange:
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class EncryptionInfo:
    key_id: str
    wrapped_key: bytes
    aad: bytes
    cipher: str = "AES-256-GCM"
    wrap_algorithm: str = "RSA-OAEP-SHA256"

    def to_json(self) -> dict[str, str]:
        return {
            "cipher": self.cipher,
            "keyId": self.key_id,
            "wrapAlgorithm": self.wrap_algorithm,
            "wrappedKey": base64.b64encode(self.wrapped_key).decode(),
            "aad": base64.b64encode(self.aad).decode(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EncryptionInfo:
        if data.get("cipher") != "AES-256-GCM":
            raise ManifestError(f"unsupported cipher {data.get('cipher')!r}")
        return cls(
            key_id=str(data["keyId"]),
            wrapped_key=base64.b64decode(data["wrappedKey"], validate=True),
            aad=base64.b64decode(data["aad"], validate=True),
            wrap_algorithm=str(data["wrapAlgorithm"]),
        )


@dataclass(frozen=True)
class SegmentManifest:
    chunk_index: ChunkIndex
    #: Bitmap (bit i = chunk i, little-endian bit order) of zstd-compressed chunks; None when
    #: compression was off for the segment.
    compressed_chunks: bytes | None
    encryption: EncryptionInfo | None
    indexes: Mapping[IndexType, BlobRange | None]
    indexes_stored_size: int
    #: Random per upload: distinguishes a re-copy under the same keys in caches.
    upload_id: str
    segment: Mapping[str, Any] = field(default_factory=dict)

    def is_compressed(self, chunk_id: int) -> bool:
        bitmap = self.compressed_chunks
        if bitmap is None:
            return False
        return bool(bitmap[chunk_id >> 3] & (1 << (chunk_id & 7)))

    def with_encryption(self, encryption: EncryptionInfo) -> SegmentManifest:
        return replace(self, encryption=encryption)

    def memory_size(self) -> int:
        return 512 + self.chunk_index.memory_size() + len(self.compressed_chunks or b"")

    def to_json_bytes(self) -> bytes:
        doc: dict[str, Any] = {
            "format": FORMAT_NAME,
            "version": MANIFEST_VERSION,
            "uploadId": self.upload_id,
            "chunkIndex": self.chunk_index.to_json(),
            "compression": None
            if self.compressed_chunks is None
            else {
                "codec": "zstd",
                "compressedChunks": base64.b64encode(self.compressed_chunks).decode(),
            },
            "encryption": None if self.encryption is None else self.encryption.to_json(),
            "segmentIndexes": {
                INDEX_NAMES[t]: None if r is None else {"position": r.position, "size": r.size}
                for t, r in self.indexes.items()
            },
            "objects": {
                "logSize": self.chunk_index.stored_size,
                "indexesSize": self.indexes_stored_size,
            },
            "remoteLogSegmentMetadata": dict(self.segment),
        }
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json_bytes(cls, raw: bytes) -> SegmentManifest:
        try:
            doc = json.loads(raw)
        except ValueError as e:
            raise ManifestError(f"manifest is not JSON: {e}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise ManifestError("not a tierlog segment manifest")
        if doc.get("version") != MANIFEST_VERSION:
            raise ManifestError(f"unsupported manifest version {doc.get('version')!r}")
        try:
            chunk_index = ChunkIndex.from_json(doc["chunkIndex"])
            compression = doc.get("compression")
            bitmap = None
            if compression is not None:
                if compression.get("codec") != "zstd":
                    raise ManifestError(f"unsupported codec {compression.get('codec')!r}")
                bitmap = base64.b64decode(compression["compressedChunks"], validate=True)
                if len(bitmap) != (chunk_index.chunk_count + 7) // 8:
                    raise ManifestError("compressed-chunk bitmap has the wrong length")
            enc = doc.get("encryption")
            indexes: dict[IndexType, BlobRange | None] = {}
            raw_indexes = doc["segmentIndexes"]
            for index_type, name in INDEX_NAMES.items():
                entry = raw_indexes.get(name)
                indexes[index_type] = (
                    None if entry is None else BlobRange(int(entry["position"]), int(entry["size"]))
                )
            return cls(
                chunk_index=chunk_index,
                compressed_chunks=bitmap,
                encryption=None if enc is None else EncryptionInfo.from_json(enc),
                indexes=indexes,
                indexes_stored_size=int(doc["objects"]["indexesSize"]),
                upload_id=str(doc["uploadId"]),
                segment=doc.get("remoteLogSegmentMetadata") or {},
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, struct.error) as e:
            if isinstance(e, ManifestError):
                raise
            raise ManifestError(f"malformed manifest: {e!r}") from None


def compressed_bitmap(flags: list[bool]) -> bytes:
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def metadata_to_json(md: RemoteLogSegmentMetadata) -> dict[str, Any]:
    tip = md.topic_id_partition
    return {
        "topicId": kafka_uuid(tip.topic_id),
        "topic": tip.topic,
        "partition": tip.partition,
        "segmentId": kafka_uuid(md.remote_log_segment_id.id),
        "startOffset": md.start_offset,
        "endOffset": md.end_offset,
        "maxTimestampMs": md.max_timestamp_ms,
        "brokerId": md.broker_id,
        "eventTimestampMs": md.event_timestamp_ms,
        "segmentSizeInBytes": md.segment_size_in_bytes,
        "segmentLeaderEpochs": {str(k): v for k, v in md.segment_leader_epochs.items()},
        "txnIdxEmpty": md.txn_idx_empty,
    }


def describes(data: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What identifies the segment a manifest was written for (topic id, partition,
    segment id, start offset); None for a manifest that records no segment."""
    if not data:
        return None
    return tuple(data.get(k) for k in ("topicId", "partition", "segmentId", "startOffset"))


def metadata_from_json(data: Mapping[str, Any]) -> RemoteLogSegmentMetadata:
    """Rebuild the segment metadata from a manifest (disaster recovery: the bucket alone)."""
    tip = TopicIdPartition(
        parse_kafka_uuid(str(data["topicId"])), str(data["topic"]), int(data["partition"])
    )
    segment_id = RemoteLogSegmentId(tip, parse_kafka_uuid(str(data["segmentId"])))
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=segment_id,
        start_offset=int(data["startOffset"]),
        end_offset=int(data["endOffset"]),
        max_timestamp_ms=int(data["maxTimestampMs"]),
        broker_id=int(data["brokerId"]),
        event_timestamp_ms=int(data["eventTimestampMs"]),
        segment_size_in_bytes=int(data["segmentSizeInBytes"]),
        custom_metadata=None,
        state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        segment_leader_epochs={int(k): int(v) for k, v in data["segmentLeaderEpochs"].items()},
        txn_idx_empty=bool(data.get("txnIdxEmpty", False)),
    )


__all__ = [
    "INDEX_NAMES",
    "BlobRange",
    "EncryptionInfo",
    "ManifestError",
    "SegmentManifest",
    "compressed_bitmap",
    "describes",
    "metadata_from_json",
    "metadata_to_json",
]
