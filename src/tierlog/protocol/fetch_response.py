"""Hand-written Fetch response encoding (v4-v17) that never copies record bytes.

kio would copy each partition's record set into its dataclass and again into the output
buffer. Here the response is a list of buffers: small ``bytes`` for the fields and the
log's own ``memoryview`` chunks for the records, so the transport can ``writelines`` them
(``writev`` on Python 3.12+). Layout follows FetchResponse.json; v12+ is "flexible"
(compact arrays/strings, tagged fields, response header v1).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PART_FIXED = struct.Struct(">ihqq")  # partition, error, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class FetchPartition:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: Sequence[Buffer] = ()
    records_size: int = 0


@dataclass(slots=True)
class FetchTopic:
    name: str
    topic_id: uuid.UUID
    partitions: list[FetchPartition] = field(default_factory=list)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> tuple[list[Buffer], int]:
    """Return (buffers, total bytes on the wire including the 4-byte size prefix)."""
    if not 4 <= version <= 17:
        raise ValueError(f"Fetch v{version} is not supported by this encoder")
    flexible = version >= 12
    out: list[Buffer] = []
    cur = bytearray()
    # Response header; the size prefix is patched in once the total is known.
    cur += b"\0\0\0\0"
    cur += _I32.pack(correlation_id)
    if flexible:
        cur += b"\0"
    cur += _I32.pack(throttle_time_ms)
    if version >= 7:
        cur += _I16.pack(error_code)
        cur += _I32.pack(session_id)
    cur += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    total = 0
    for t in topics:
        if version >= 13:
            cur += t.topic_id.bytes
        else:
            name = t.name.encode()
            cur += _uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            cur += name
        parts = t.partitions
        cur += _uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for p in parts:
            cur += _PART_FIXED.pack(
                p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
            )
            if version >= 5:
                cur += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                cur += b"\0" if flexible else _I32.pack(-1)
            else:
                cur += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for pid, first_offset in aborted:
                    cur += _ABORTED.pack(pid, first_offset)
                    if flexible:
                        cur += b"\0"
            if version >= 11:
                cur += _I32.pack(p.preferred_read_replica)
            size = p.records_size
            cur += _uvarint(size + 1) if flexible else _I32.pack(size)
            if size:
                total += len(cur)
                out.append(cur)
                out.extend(p.records)
                total += size
                cur = bytearray()
            if flexible:
                cur += b"\0"  # partition tagged fields
        if flexible:
            cur += b"\0"  # topic tagged fields
    if flexible:
        cur += b"\0"  # response tagged fields
    total += len(cur)
    out.append(cur)
    first = out[0]
    assert isinstance(first, bytearray)
    first[0:4] = _I32.pack(total - 4)
    return out, total
