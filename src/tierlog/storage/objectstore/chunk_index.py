"""Maps original byte ranges of a segment to stored (transformed) byte ranges.

Original chunks all have the same size except the last, so the chunk holding an original
position is found by division. Stored chunk sizes vary when compression is on; they are
kept as a prefix-sum array (one machine word per chunk in memory) and looked up by binary
search when mapping a stored position back to its chunk.

Serialised forms (in the manifest):

* ``fixed``: every stored chunk has the same size except the last one (no compression).
* ``packed``: ``count:u32 | base:u32 | width:u8 | count * (size - base) in width bytes``,
  big-endian, base64. A 1 GiB segment in 4 MiB chunks with compression costs ~1 KiB.
"""

from __future__ import annotations

import base64
import bisect
import struct
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_PACKED_HEADER = struct.Struct(">IIB")


@dataclass(frozen=True, eq=False)
class ChunkIndex:
    original_chunk_size: int
    original_file_size: int
    #: ``stored_offsets[i]`` is where chunk i starts in the stored object; one extra final
    #: element holds the stored object size.
    stored_offsets: array[int]

    def __post_init__(self) -> None:
        if self.original_chunk_size <= 0 or self.original_file_size < 0:
            raise ValueError("invalid chunk index sizes")
        expected = -(-self.original_file_size // self.original_chunk_size)
        if len(self.stored_offsets) != expected + 1:
            raise ValueError(
                f"chunk index has {len(self.stored_offsets) - 1} chunks, expected {expected}"
            )

    @property
    def chunk_count(self) -> int:
        return len(self.stored_offsets) - 1

    @property
    def stored_size(self) -> int:
        return self.stored_offsets[-1]

    def chunk_for_position(self, position: int) -> int:
        if not 0 <= position < self.original_file_size:
            raise IndexError(f"position {position} outside [0, {self.original_file_size})")
        return position // self.original_chunk_size

    def chunks_for_range(self, start: int, end_inclusive: int) -> range:
        return range(self.chunk_for_position(start), self.chunk_for_position(end_inclusive) + 1)

    def original_range(self, chunk_id: int) -> tuple[int, int]:
        """[start, end) of the chunk in the original file."""
        start = chunk_id * self.original_chunk_size
        return start, min(start + self.original_chunk_size, self.original_file_size)

    def stored_range(self, chunk_id: int) -> tuple[int, int]:
        """[start, end) of the chunk in the stored object."""
        return self.stored_offsets[chunk_id], self.stored_offsets[chunk_id + 1]

    def chunk_at_stored_position(self, stored_position: int) -> int:
        if not 0 <= stored_position < self.stored_size:
            raise IndexError(f"stored position {stored_position} outside the object")
        return bisect.bisect_right(self.stored_offsets, stored_position) - 1

    def memory_size(self) -> int:
        return 64 + self.stored_offsets.itemsize * len(self.stored_offsets)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ChunkIndex)
            and self.original_chunk_size == other.original_chunk_size
            and self.original_file_size == other.original_file_size
            and self.stored_offsets == other.stored_offsets
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_stored_sizes(
        cls, original_chunk_size: int, original_file_size: int, stored_sizes: Sequence[int]
    ) -> ChunkIndex:
        offsets = array("Q", [0])
        total = 0
        for size in stored_sizes:
            total += size
            offsets.append(total)
        return cls(original_chunk_size, original_file_size, offsets)

    def stored_sizes(self) -> list[int]:
        o = self.stored_offsets
        return [o[i + 1] - o[i] for i in range(self.chunk_count)]

    def to_json(self) -> dict[str, Any]:
        sizes = self.stored_sizes()
        head = {
            "originalChunkSize": self.original_chunk_size,
            "originalFileSize": self.original_file_size,
        }
        if len(sizes) <= 1 or len(set(sizes[:-1])) == 1:
            return {
                "type": "fixed",
                **head,
                "storedChunkSize": sizes[0] if sizes else 0,
                "lastStoredChunkSize": sizes[-1] if sizes else 0,
            }
        return {"type": "packed", **head, "storedSizes": _pack(sizes)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChunkIndex:
        chunk_size = int(data["originalChunkSize"])
        file_size = int(data["originalFileSize"])
        if chunk_size <= 0 or file_size < 0:
            raise ValueError("invalid chunk index sizes")
        count = -(-file_size // chunk_size)
        kind = data["type"]
        if kind == "fixed":
            if count == 0:
                return cls.from_stored_sizes(chunk_size, file_size, [])
            sizes = [int(data["storedChunkSize"])] * (count - 1)
            sizes.append(int(data["lastStoredChunkSize"]))
            return cls.from_stored_sizes(chunk_size, file_size, sizes)
        if kind == "packed":
            sizes = _unpack(str(data["storedSizes"]), count)
            return cls.from_stored_sizes(chunk_size, file_size, sizes)
        raise ValueError(f"unknown chunk index type {kind!r}")


def _pack(sizes: Sequence[int]) -> str:
    base = min(sizes)
    span = max(sizes) - base
    width = max(1, (span.bit_length() + 7) // 8)
    out = bytearray(_PACKED_HEADER.pack(len(sizes), base, width))
    for size in sizes:
        out += (size - base).to_bytes(width, "big")
    return base64.b64encode(bytes(out)).decode("ascii")


def _unpack(text: str, expected_count: int) -> list[int]:
    raw = base64.b64decode(text, validate=True)
    count, base, width = _PACKED_HEADER.unpack_from(raw)
    if count != expected_count or not 1 <= width <= 4:
        raise ValueError(f"packed chunk index has {count} entries, expected {expected_count}")
    body = raw[_PACKED_HEADER.size :]
    if len(body) != count * width:
        raise ValueError("packed chunk index is truncated")
    return [base + int.from_bytes(body[i : i + width], "big") for i in range(0, len(body), width)]
