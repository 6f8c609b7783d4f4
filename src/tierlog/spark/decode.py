"""Kafka v2 record batches (a `.log` slice) to Arrow, vectorised with numpy.

Spark executors turn whole segments into rows, so decoding is the hot loop of a history
scan. Python objects per record (what aiokafka's C reader hands back) cost more than the
parse itself; here the only per-record Python work is following the record-length chain,
and every field is then pulled out for all records at once. Keys, values and headers are
never copied into Python `bytes`: Arrow columns point into one buffer that holds the
records sections (the input itself when no batch is compressed, else the inflated sections
joined), and Arrow's `take` compacts them in C++.
bench/bench_spark.py holds the figures that chose this over aiokafka's reader.

Semantics follow Spark's Kafka source: control batches are skipped (their offsets are
gaps), and a row exists for every data record whose offset is in [start, end), except with
`isolation.level=read_committed`, where an `AbortedTxnFilter` drops the batches of aborted
transactions (those offsets are gaps too).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from crc32c import crc32c

from tierlog.spark import codecs
from tierlog.spark.aborted import AbortedTxnFilter
from tierlog.spark.schema import HEADER_TYPE, arrow_schema

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
_CRC_START = 21  # CRC32C covers attributes .. end of batch
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_CONTROL = 0x20

I64 = npt.NDArray[np.int64]


class CorruptBatchError(ValueError):
    """The bytes are not a well-formed v2 batch; Spark's source would fail the task too."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """One decode step over a byte buffer.

    `consumed` counts the bytes of whole batches handled, so a caller streaming chunks
    keeps `data[consumed:]` and prepends it to the next read. `next_offset` is one past the
    last offset the consumed batches cover (control batches included), or the base offset
    of the first batch at/after `end`; the caller is finished once it reaches `end`.
    """

    batch: pa.RecordBatch
    consumed: int
    next_offset: int


def _varint(u8: npt.NDArray[np.uint8], pos: I64, width: int) -> tuple[I64, I64]:
    """Zig-zag varints at every position in `pos`: (values, encoded lengths).

    Works one byte column at a time and stops when no varint continues, so the usual
    one- and two-byte fields cost one or two passes.
    """
    last = len(u8) - 1
    value = np.zeros(len(pos), dtype=np.uint64)
    length = np.zeros(len(pos), dtype=np.int64)
    active = np.ones(len(pos), dtype=bool)
    for k in range(width):
        b = u8[np.minimum(pos + k, last)]
        value |= ((b & 0x7F).astype(np.uint64) << np.uint64(7 * k)) * active
        length += active
        active &= b >= 0x80
        if not active.any():
            break
    else:
        raise CorruptBatchError(f"varint longer than {width} bytes")
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -((value & np.uint64(1)).astype(np.int64))
    return signed, length


def _record_starts(
    data: bytes | memoryview, pos: int, count: int, end: int, out: list[int]
) -> None:
    """Follow the length chain of one records section: the only per-record Python loop.

    Record lengths are non-negative, so the zig-zag value is just `raw >> 1`; one- and
    two-byte lengths (records under 8 KiB) take the short paths.
    """
    append = out.append
    try:
        for _ in range(count):
            append(pos)
            b = data[pos]
            if b < 0x80:
                pos += 1 + (b >> 1)
                continue
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            if raw < 0x4000:
                pos += 2 + (raw >> 1)
                continue
            raw &= 0x3FFF
            pos += 2
            shift = 14
            while True:
                b = data[pos]
                pos += 1
                raw |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            pos += raw >> 1
    except IndexError:
        raise CorruptBatchError("record runs past the end of its batch") from None
    if pos != end:
        raise CorruptBatchError(f"records end at {pos}, batch ends at {end}")


def _binary(buf: pa.Buffer, starts: I64, lens: I64) -> pa.Array:
    """Arrow binary column of `buf[starts[i] : starts[i] + lens[i]]`; length -1 is null.

    The slices are increasing and disjoint, so interleaving them with the gaps between
    them gives valid Arrow offsets; taking the even elements compacts them in one C++ pass.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], type=pa.binary())
    valid = lens >= 0
    size = np.where(valid, lens, 0)
    offsets = np.empty(2 * n + 1, dtype=np.int32)
    offsets[0 : 2 * n : 2] = starts
    offsets[1 : 2 * n : 2] = starts + size
    offsets[2 * n] = starts[-1] + size[-1]
    spread = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(offsets), buf])
    compact = spread.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if bool(valid.all()):
        return compact
    validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, *compact.buffers()[1:]])


def _headers(
    u8: npt.NDArray[np.uint8], buf: pa.Buffer, pos: I64, counts: I64, rec_end: I64
) -> pa.Array:
    """The headers column: null where a record has none, as Spark's source does."""
    rec_parts: list[I64] = []
    key_parts: list[tuple[I64, I64]] = []
    val_parts: list[tuple[I64, I64]] = []
    pos = pos.copy()
    for j in range(int(counts.max(initial=0))):
        sel = np.nonzero(counts > j)[0]
        q = pos[sel]
        klen, n = _varint(u8, q, 5)
        if bool((klen < 0).any()):
            raise CorruptBatchError("negative header key length")
        q = q + n
        kstart = q
        q = q + klen
        vlen, n = _varint(u8, q, 5)
        q = q + n
        vstart = q
        q = q + np.maximum(vlen, 0)
        pos[sel] = q
        rec_parts.append(sel)
        key_parts.append((kstart, klen))
        val_parts.append((vstart, vlen))
    if not np.array_equal(pos, rec_end):
        raise CorruptBatchError("record length disagrees with its fields")
    if rec_parts:
        order = np.argsort(np.concatenate(rec_parts), kind="stable")
        ks = np.concatenate([k for k, _ in key_parts])[order]
        kl = np.concatenate([k for _, k in key_parts])[order]
        vs = np.concatenate([v for v, _ in val_parts])[order]
        vl = np.concatenate([v for _, v in val_parts])[order]
    else:
        ks = kl = vs = vl = np.empty(0, dtype=np.int64)
    try:
        keys = _binary(buf, ks, kl).cast(pa.string())
    except pa.ArrowInvalid as exc:
        raise CorruptBatchError(f"header key is not UTF-8: {exc}") from None
    entries = pa.StructArray.from_arrays([keys, _binary(buf, vs, vl)], fields=list(HEADER_TYPE))
    list_offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    has = counts > 0
    mask = None if bool(has.all()) else pa.array(~has)
    return pa.ListArray.from_arrays(pa.array(list_offsets), entries, mask=mask)


def _left_out(
    view: memoryview, pos: int, size: int, pid: int, attr: int, aborted: AbortedTxnFilter | None
) -> bool:
    """A control batch, or (read_committed) a batch of an aborted transaction."""
    if aborted is None:
        return bool(attr & _CONTROL)
    return aborted.drops(view[pos : pos + size], pid, attr)


def decode_batches(
    data: bytes | bytearray | memoryview,
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    verify_crc: bool = True,
    aborted: AbortedTxnFilter | None = None,
) -> Decoded:
    """Decode the whole batches at the front of `data` into rows with offsets in [start, end).

    A trailing partial batch is left unconsumed; a batch whose base offset is at or past
    `end` stops the scan.
    """
    view = memoryview(data).cast("B")
    total = len(view)
    pos = 0
    next_offset = -1
    sections: list[memoryview] = []
    section_at: list[int] = []  # where each section starts in `data`, while all are plain
    bases: list[int] = []
    base_ts: list[int] = []
    max_ts: list[int] = []
    attrs: list[int] = []
    counts: list[int] = []
    while total - pos >= HEADER_SIZE:
        (
            base,
            length,
            _epoch,
            magic,
            crc,
            attr,
            last_delta,
            first_ts,
            last_ts,
            pid,
            _pep,
            _seq,
            count,
        ) = BATCH_HEADER.unpack_from(view, pos)
        if magic != 2:
            raise CorruptBatchError(f"batch at byte {pos} has magic {magic}, expected 2")
        size = LOG_OVERHEAD + length
        if size < HEADER_SIZE:
            raise CorruptBatchError(f"batch at byte {pos} has length {length}")
        if pos + size > total:
            break
        if base >= end:
            next_offset = base
            break
        next_offset = base + last_delta + 1
        if next_offset <= start or _left_out(view, pos, size, pid, attr, aborted):
            pos += size
            continue
        if verify_crc and crc32c(view[pos + _CRC_START : pos + size]) != crc:
            raise CorruptBatchError(f"CRC mismatch in batch at offset {base}")
        payload = view[pos + HEADER_SIZE : pos + size]
        codec = attr & _CODEC_MASK
        if codec == codecs.NONE:
            sections.append(payload)
            section_at.append(pos + HEADER_SIZE)
        else:
            sections.append(codecs.decompress(codec, payload))
        bases.append(base)
        base_ts.append(first_ts)
        max_ts.append(last_ts)
        attrs.append(attr)
        counts.append(count)
        pos += size
    buffer, spans = _record_spans(data, view, sections, section_at)
    rows = _rows(
        buffer,
        spans,
        bases,
        base_ts,
        max_ts,
        attrs,
        counts,
        topic,
        partition,
        start,
        end,
        include_headers,
    )
    return Decoded(rows, pos, next_offset)


def _record_spans(
    data: bytes | bytearray | memoryview,
    view: memoryview,
    sections: list[memoryview],
    section_at: list[int],
) -> tuple[bytes | memoryview, list[tuple[int, int]]]:
    """One buffer holding every batch's records, and each batch's (start, length) in it.

    While every section is a plain slice of ``data`` (no batch was compressed) the buffer is
    ``data`` itself, so column values are copied once (by ``take``); otherwise the sections
    are joined.
    """
    if len(section_at) == len(sections) and len(view) < 2**31:
        buffer: bytes | memoryview = data if isinstance(data, bytes) else view
        return buffer, [(at, len(sec)) for at, sec in zip(section_at, sections, strict=True)]
    spans = []
    at = 0
    for sec in sections:
        spans.append((at, len(sec)))
        at += len(sec)
    return b"".join(sections), spans


def _rows(
    data: bytes | memoryview,
    spans: list[tuple[int, int]],
    bases: list[int],
    base_ts: list[int],
    max_ts: list[int],
    attrs: list[int],
    counts: list[int],
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    if not spans:
        return pa.RecordBatch.from_pylist([], schema=schema)
    if len(data) >= 2**31:
        raise ValueError("decode at most 2 GiB of records per call")
    starts: list[int] = []
    for (at, size), count in zip(spans, counts, strict=True):
        if count < 0 or count > size:
            raise CorruptBatchError(f"record count {count} does not fit its batch")
        _record_starts(data, at, count, at + size, starts)
    u8 = np.frombuffer(data, dtype=np.uint8)
    batch_of = np.repeat(np.arange(len(counts)), counts)
    p = np.array(starts, dtype=np.int64)
    rec_len, n = _varint(u8, p, 5)
    p = p + n
    rec_end = p + rec_len
    p = p + 1  # record attributes: unused in v2
    ts_delta, n = _varint(u8, p, 10)
    p = p + n
    offset_delta, n = _varint(u8, p, 5)
    p = p + n
    offsets = np.array(bases, dtype=np.int64)[batch_of] + offset_delta
    keep = (offsets >= start) & (offsets < end)
    if not bool(keep.all()):
        idx = np.nonzero(keep)[0]
        p, rec_end, ts_delta, offsets, batch_of = (
            p[idx],
            rec_end[idx],
            ts_delta[idx],
            offsets[idx],
            batch_of[idx],
        )
    key_len, n = _varint(u8, p, 5)
    key_start = p + n
    p = key_start + np.maximum(key_len, 0)
    value_len, n = _varint(u8, p, 5)
    value_start = p + n
    p = value_start + np.maximum(value_len, 0)
    header_count, n = _varint(u8, p, 5)
    p = p + n
    if bool((header_count < 0).any()) or bool((p > rec_end).any()):
        raise CorruptBatchError("record length disagrees with its fields")
    batch_attr = np.array(attrs, dtype=np.int64)[batch_of]
    append_time = (batch_attr & _LOG_APPEND_TIME) != 0
    ts_ms = np.where(
        append_time,
        np.array(max_ts, dtype=np.int64)[batch_of],
        np.array(base_ts, dtype=np.int64)[batch_of] + ts_delta,
    )
    buf = pa.py_buffer(data)
    rows = len(offsets)
    columns: list[pa.Array] = [
        _binary(buf, key_start, key_len),
        _binary(buf, value_start, value_len),
        pa.repeat(pa.scalar(topic, pa.string()), rows),
        pa.array(np.full(rows, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(ts_ms * 1000, type=pa.timestamp("us", tz="UTC")),
        pa.array(append_time.astype(np.int32)),
    ]
    if include_headers:
        columns.append(_headers(u8, buf, p, header_count, rec_end))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
