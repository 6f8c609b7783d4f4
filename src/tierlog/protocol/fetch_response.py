"""Hand-written Fetch response encoding (v4-v17) that never copies record bytes.

kio would copy each partition's record set into its dataclass and again into the output
buffer. Here the response is a list of buffers: small ``bytes`` for the fields and the
log's own chunks for the records, so the transport can ``writelines`` them (``writev`` on
Python 3.12+): ``memoryview`` chunks of a remote read, or a ``FileRegion`` of a local log
file, which the transport sends with ``sendfile``. Layout follows FetchResponse.json; v12+
is "flexible" (compact arrays/strings, tagged fields, response header v1).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PART_FIXED = struct.Struct(">ihqq")  # partition, error, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")
_EPOCH_END = struct.Struct(">iqB")  # epoch, end offset, its empty tagged fields

Buffer = bytes | bytearray | memoryview


class FileRegion(Protocol):
    """Record bytes still in a file: the encoder needs only their length, the transport
    sends them from the file (``fd`` at ``position``) or reads them (``read``)."""

    @property
    def position(self) -> int: ...

    @property
    def fd(self) -> int: ...

    def read(self, skip: int = 0) -> bytes: ...

    def __bytes__(self) -> bytes: ...

    def __len__(self) -> int: ...


#: One buffer of an encoded response.
ResponsePart = Buffer | FileRegion


@dataclass(slots=True)
class FetchPartition:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: Sequence[ResponsePart] = ()
    records_size: int = 0
    diverging_epoch: tuple[int, int] | None = None
    """(epoch, end offset) for a follower whose log diverged from the leader's (KIP-595's
    truncation on fetch, v12+): the tagged field 0, sent with no records."""


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


def _array_len(n: int, flexible: bool) -> bytes:
    """An array's length prefix: compact (n + 1 as a uvarint) in flexible versions."""
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def _encode_header(
    cur: bytearray,
    version: int,
    correlation_id: int,
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
) -> None:
    """Response header and top-level fields, with a zero size prefix patched in at the end."""
    flexible = version >= 12
    cur += b"\0\0\0\0"
    cur += _I32.pack(correlation_id)
    if flexible:
        cur += b"\0"  # response header v1 tagged fields
    cur += _I32.pack(throttle_time_ms)
    if version >= 7:
        cur += _I16.pack(error_code)
        cur += _I32.pack(session_id)


def _encode_topic_key(cur: bytearray, topic: FetchTopic, version: int) -> None:
    """The topic id (v13+) or the topic name."""
    if version >= 13:
        cur += topic.topic_id.bytes
        return
    name = topic.name.encode()
    cur += _uvarint(len(name) + 1) if version >= 12 else _I16.pack(len(name))
    cur += name


def _encode_aborted(cur: bytearray, aborted: list[tuple[int, int]] | None, flexible: bool) -> None:
    """The aborted transactions array, null when ``aborted`` is None."""
    if aborted is None:
        cur += b"\0" if flexible else _I32.pack(-1)
        return
    cur += _array_len(len(aborted), flexible)
    for pid, first_offset in aborted:
        cur += _ABORTED.pack(pid, first_offset)
        if flexible:
            cur += b"\0"


def _encode_partition_tags(cur: bytearray, p: FetchPartition) -> None:
    """A flexible partition's tagged fields: none, or the diverging epoch (tag 0)."""
    if p.diverging_epoch is None:
        cur += b"\0"
        return
    cur += b"\x01\x00"  # one field, tag 0
    cur += _uvarint(_EPOCH_END.size)
    cur += _EPOCH_END.pack(*p.diverging_epoch, 0)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> tuple[list[ResponsePart], int]:
    """Return (buffers, total bytes on the wire including the 4-byte size prefix).

    Fields accumulate in one ``bytearray``; at each partition with records it is closed and
    followed by the partition's own record buffers, untouched, and a fresh one starts.
    """
    if not 4 <= version <= 17:
        raise ValueError(f"Fetch v{version} is not supported by this encoder")
    flexible = version >= 12
    out: list[ResponsePart] = []
    cur = bytearray()
    _encode_header(cur, version, correlation_id, throttle_time_ms, error_code, session_id)
    cur += _array_len(len(topics), flexible)
    total = 0
    for t in topics:
        _encode_topic_key(cur, t, version)
        cur += _array_len(len(t.partitions), flexible)
        for p in t.partitions:
            cur += _PART_FIXED.pack(
                p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
            )
            if version >= 5:
                cur += _I64.pack(p.log_start_offset)
            _encode_aborted(cur, p.aborted_transactions, flexible)
            if version >= 11:
                cur += _I32.pack(p.preferred_read_replica)
            size = p.records_size
            cur += _uvarint(size + 1) if flexible else _I32.pack(size)
            if size:
                total += len(cur) + size
                out.append(cur)
                out.extend(p.records)
                cur = bytearray()
            if flexible:
                _encode_partition_tags(cur, p)
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
