"""Decoding one batch's records and writing back the ones the cleaner keeps.

A retained record is copied byte for byte from its key onwards (key, value, headers), so
header keys that are not UTF-8 and every field the broker does not model survive. What the
cleaner rewrites follows Kafka's ``MemoryRecords.filterTo`` for a v2 batch:

* the batch keeps its base offset, its last offset delta (so the producer's last sequence is
  unchanged and the next batch does not look out of sequence), producer id, epoch, base
  sequence, partition leader epoch, codec, timestamp type and transactional/control flags;
* each record keeps its offset delta, so offsets stay where they were and the log has gaps;
* the base timestamp is the first kept record's, or the delete horizon (KIP-534: attribute
  bit 6, the time after which the batch's tombstones may go) once one is set; record
  timestamp deltas are taken against it, so every record keeps its absolute timestamp;
* the max timestamp is the largest kept record's (for ``LogAppendTime``, the batch's own);
* a batch the cleaner empties but must keep for an active producer's sequence becomes an
  empty batch of the same offsets (Kafka's ``writeEmptyHeader``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    Compression,
    RecordsError,
    compress,
    decompress,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_U32 = struct.Struct(">I")
_ATTRIBUTES_OFFSET = 21


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record of a batch, with what the cleaner decides on and its untouched tail."""

    offset_delta: int
    timestamp: int
    attributes: int
    key: bytes | None
    has_value: bool
    tail: bytes
    """The record's bytes from its key length on (key, value, headers), copied verbatim."""


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), or None if no cleaning has set one."""
    if header.attributes & DELETE_HORIZON_MASK:
        return header.base_timestamp
    return None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(data):
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "varint runs past end of records")
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    shift = 0
    raw = 0
    while True:
        if pos >= len(data):
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "varint runs past end of records")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "varint too long")


def _put_varint(out: bytearray, value: int) -> None:
    raw = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _skip_bytes(data: bytes, pos: int) -> tuple[int, int]:
    """(length or -1, position after the field)."""
    n, pos = _varint(data, pos)
    if n > 0:
        pos += n
        if pos > len(data):
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record field runs past its end")
    return n, pos


def decode_records(batch: Buffer, header: BatchHeader) -> list[RawRecord]:
    """Every record of the batch at ``header.position`` in ``batch`` (any codec)."""
    raw = bytes(memoryview(batch)[header.position + RECORDS_OFFSET : header.end])
    data = decompress(header.compression, raw)
    out: list[RawRecord] = []
    pos = 0
    for _ in range(header.records_count):
        length, pos = _varint(data, pos)
        end = pos + length
        if length < 1 or end > len(data):
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record runs past end of batch")
        attributes = data[pos]
        ts_delta, p = _varint(data, pos + 1)
        off_delta, p = _varint(data, p)
        tail_start = p
        key_len, p = _skip_bytes(data, p)
        key = data[p - key_len : p] if key_len >= 0 else None
        value_len, p = _skip_bytes(data, p)
        n_headers, p = _varint(data, p)
        for _h in range(max(n_headers, 0)):
            _, p = _skip_bytes(data, p)
            _, p = _skip_bytes(data, p)
        if p != end:
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record length does not match body")
        out.append(
            RawRecord(
                off_delta,
                header.base_timestamp + ts_delta,
                attributes,
                key,
                value_len >= 0,
                data[tail_start:end],
            )
        )
        pos = end
    return out


def _finish(
    header: BatchHeader,
    attributes: int,
    base_ts: int,
    max_ts: int,
    count: int,
    payload: bytes,
) -> bytes:
    size = RECORDS_OFFSET + len(payload)
    out = bytearray(size)
    _HEADER.pack_into(
        out,
        0,
        header.base_offset,
        size - LOG_OVERHEAD,
        header.partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        header.last_offset_delta,
        base_ts,
        max_ts,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    out[RECORDS_OFFSET:] = payload
    _U32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_retained(header: BatchHeader, records: list[RawRecord], horizon_ms: int | None) -> bytes:
    """The batch ``header`` came from, holding only ``records`` (at least one)."""
    if not records:
        raise ValueError("a retained batch needs at least one record")
    base_ts = horizon_ms if horizon_ms is not None else records[0].timestamp
    body = bytearray()
    for rec in records:
        rb = bytearray((rec.attributes,))
        _put_varint(rb, rec.timestamp - base_ts)
        _put_varint(rb, rec.offset_delta)
        rb += rec.tail
        _put_varint(body, len(rb))
        body += rb
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    if attributes & TIMESTAMP_TYPE_MASK:
        max_ts = header.max_timestamp
    else:
        max_ts = max(rec.timestamp for rec in records)
    payload = compress(Compression(attributes & COMPRESSION_MASK), bytes(body))
    return _finish(header, attributes, base_ts, max_ts, len(records), payload)


def build_empty(header: BatchHeader) -> bytes:
    """An empty batch with the offsets and producer fields of ``header`` (no codec)."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    ts = header.max_timestamp
    return _finish(header, attributes, ts, ts, 0, b"")
