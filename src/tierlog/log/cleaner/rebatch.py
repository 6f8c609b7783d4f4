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


RecordSpan = tuple[int, int, int, bytes | None, bool, int, int]
"""One record of a batch, as the cleaner decides on it: ``(offset delta, timestamp delta,
attributes, key or None, has a value, start, end)``; ``[start, end)`` are the record's bytes
from its key length on (key, value, headers) in the buffer ``scan_records`` returns, copied
verbatim when the record is kept. Plain tuples: this runs once per record, twice a cleaning."""


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), or None if no cleaning has set one."""
    if header.attributes & DELETE_HORIZON_MASK:
        return header.base_timestamp
    return None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the zigzag varint at ``pos``; one- and two-byte ones
    (every length below 8 KiB) without a loop."""
    try:
        b = data[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        b2 = data[pos + 1]
    except IndexError as exc:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "varint runs past end of records") from exc
    if b2 < 0x80:
        raw = (b & 0x7F) | (b2 << 7)
        return (raw >> 1) ^ -(raw & 1), pos + 2
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
    if raw < 0x80:
        out.append(raw)
        return
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _check_body(data: bytes, p: int, end: int) -> None:
    """The value and headers of a record starting at ``p`` end exactly at ``end``."""
    n, p = _varint(data, p)
    p += max(n, 0)
    count, p = _varint(data, p)
    for _ in range(max(count, 0)):
        n, p = _varint(data, p)
        p += max(n, 0)
        n, p = _varint(data, p)
        p += max(n, 0)
    if p != end:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record length does not match body")


def scan_records(
    batch: Buffer, header: BatchHeader, *, strict: bool = False
) -> tuple[bytes, list[RecordSpan]]:
    """Every record of the batch at ``header.position`` in ``batch`` (any codec), and the
    buffer its spans index: ``batch`` itself when uncompressed (no copy), else the inflated
    records section. The cleaner parses only the fields before the value (the record
    length bounds the rest, and the batch CRC has vouched for the bytes); ``strict`` also
    checks that value and headers fill each record exactly, as produce validation must."""
    if header.compression is Compression.NONE:
        data = batch if type(batch) is bytes else bytes(batch)
        pos = header.position + RECORDS_OFFSET
        limit = header.end
    else:
        raw = bytes(memoryview(batch)[header.position + RECORDS_OFFSET : header.end])
        data = decompress(header.compression, raw)
        pos = 0
        limit = len(data)
    spans: list[RecordSpan] = []
    append = spans.append
    varint = _varint
    try:
        for _ in range(header.records_count):
            length, pos = varint(data, pos)
            end = pos + length
            if length < 1 or end > limit:
                raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record runs past end of batch")
            ts_delta, p = varint(data, pos + 1)
            off_delta, tail = varint(data, p)
            key_len, p = varint(data, tail)
            key = data[p : p + key_len] if key_len >= 0 else None
            p += max(key_len, 0)
            if p >= end:
                raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record key runs past its end")
            if strict:
                _check_body(data, p, end)
            # a zigzag varint is negative (a null value) exactly when its first byte is odd
            append((off_delta, ts_delta, data[pos], key, not data[p] & 1, tail, end))
            pos = end
    except IndexError as exc:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record runs past end of batch") from exc
    return data, spans


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


def build_retained(
    header: BatchHeader, data: bytes, kept: list[RecordSpan], horizon_ms: int | None
) -> bytes:
    """The batch ``header`` came from, holding only the ``kept`` spans of ``data`` (at least
    one), as ``scan_records`` returned them."""
    if not kept:
        raise ValueError("a retained batch needs at least one record")
    old_base = header.base_timestamp
    base_ts = horizon_ms if horizon_ms is not None else old_base + kept[0][1]
    shift = old_base - base_ts
    body = bytearray()
    put = _put_varint
    for off_delta, ts_delta, attributes, _key, _has_value, start, end in kept:
        rb = bytearray((attributes,))
        put(rb, ts_delta + shift)
        put(rb, off_delta)
        rb += data[start:end]
        put(body, len(rb))
        body += rb
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    if attributes & TIMESTAMP_TYPE_MASK:
        max_ts = header.max_timestamp
    else:
        max_ts = old_base + max(span[1] for span in kept)
    payload = compress(Compression(attributes & COMPRESSION_MASK), bytes(body))
    return _finish(header, attributes, base_ts, max_ts, len(kept), payload)


def build_empty(header: BatchHeader) -> bytes:
    """An empty batch with the offsets and producer fields of ``header`` (no codec)."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    ts = header.max_timestamp
    return _finish(header, attributes, ts, ts, 0, b"")
