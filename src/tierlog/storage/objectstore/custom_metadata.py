"""KIP-917 custom metadata: what a reader needs to find a segment's objects again.

Stored with every segment record and replicated to every broker, and Kafka rejects more
than ``remote.log.metadata.custom.metadata.max.bytes`` (128 by default). We therefore store
only what cannot be derived from the segment metadata itself: the key prefix and hash mask
in force at upload time, plus the stored size. The topic name, ids and offsets are already
in the metadata, so a 249-character topic name costs nothing here.

Layout: ``version:u8 | stored_size:uvarint | mask:uvarint | prefix_len:uvarint | prefix``.
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION = 1


@dataclass(frozen=True, slots=True)
class SegmentLocation:
    key_prefix: str
    key_prefix_mask: int
    stored_size: int

    def encode(self) -> bytes:
        prefix = self.key_prefix.encode()
        return (
            bytes([VERSION])
            + _uvarint(self.stored_size)
            + _uvarint(self.key_prefix_mask)
            + _uvarint(len(prefix))
            + prefix
        )

    @classmethod
    def decode(cls, data: bytes) -> SegmentLocation:
        if not data or data[0] != VERSION:
            raise ValueError(f"unsupported custom metadata version {data[:1]!r}")
        size, pos = _read_uvarint(data, 1)
        mask, pos = _read_uvarint(data, pos)
        length, pos = _read_uvarint(data, pos)
        if pos + length != len(data):
            raise ValueError("custom metadata length mismatch")
        return cls(data[pos : pos + length].decode(), mask, size)


def _uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError("uvarint must be non-negative")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated uvarint in custom metadata")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
