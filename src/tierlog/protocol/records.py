"""Kafka v2 record batches: header scan, validation and in-place patching (sans-IO).

Rules of this module:

* The broker treats a batch as opaque bytes. Everything on the produce and fetch hot paths
  reads the fixed 61-byte header with one ``struct`` call and checks the CRC32C with the
  ``crc32c`` package (C, releases the GIL). Individual records are never decoded there.
* Offsets and the partition leader epoch live outside the CRC-covered range, so assigning them
  is a plain 8- or 4-byte overwrite. Only LogAppendTime changes CRC-covered bytes (attributes
  and max timestamp), and only then is the CRC recomputed.
* Errors carry Kafka's codes: a damaged batch is CORRUPT_MESSAGE, an old magic is
  UNSUPPORTED_FOR_MESSAGE_FORMAT, a structurally inconsistent client batch is INVALID_RECORD.
* The record-level decoder and builder at the bottom are for tools and tests (dump-log,
  byte-format tests), where clarity matters more than speed.

Header layout (big-endian), with byte offsets::

    0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
    17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
    35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32
    57 recordsCount i32 | 61 records...

``batchLength`` counts the bytes after itself, so a batch occupies ``batchLength + 12`` bytes.
The CRC covers attributes through the end of the batch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import cramjam
import crc32c

from tierlog.protocol.errors import ErrorCode, KafkaError

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

LOG_OVERHEAD = 12
"""Bytes before the length-counted part of any batch (baseOffset + batchLength)."""
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
"""Size of an empty v2 batch."""
LEGACY_MIN_SIZE = 14
"""Kafka rejects a length field below the v0 record overhead before even reading the magic."""

CURRENT_MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_MAX_INT32 = 2**31 - 1


class Compression(IntEnum):
    """Codec ids in the low three attribute bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: who set the timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class RecordsError(KafkaError):
    """A batch failed validation; ``position`` is where in the buffer it starts."""

    def __init__(self, code: ErrorCode, message: str, position: int = 0) -> None:
        super().__init__(code, message)
        self.position = position


class BatchHeader(NamedTuple):
    """The decoded fixed header of one batch at ``position`` in its buffer.

    A NamedTuple because scans build one per batch and tuple construction is the cheapest
    Python object to make from ``struct.unpack_from``.
    """

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_MASK else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from int32 max to 0 like Kafka's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wraps past int32 max to 0."""
    if sequence > _MAX_INT32 - increment:
        return increment - (_MAX_INT32 - sequence) - 1
    return sequence + increment


Buffer = bytes | bytearray | memoryview


def compute_crc(buf: Buffer, position: int, end: int) -> int:
    """CRC32C over attributes..end of the batch at ``position``."""
    view = memoryview(buf)[position + ATTRIBUTES_OFFSET : end]
    return int(crc32c.crc32c(view))


def read_header(buf: Buffer, position: int = 0) -> BatchHeader:
    """Decode the header at ``position`` without any validation (caller knows it is whole)."""
    return BatchHeader(position, *_HEADER.unpack_from(buf, position))


def check_batch(buf: Buffer, pos: int, limit: int, verify_crc: bool = True) -> BatchHeader:
    """Validate the batch at ``pos``, which must end at or before ``limit``."""
    remaining = limit - pos
    if remaining < LOG_OVERHEAD:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE, f"{remaining} trailing bytes are not a batch", pos
        )
    _, batch_length = _PREFIX.unpack_from(buf, pos)
    if batch_length < LEGACY_MIN_SIZE:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE, f"batch length {batch_length} below minimum", pos
        )
    if remaining < MAGIC_OFFSET + 1:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "batch truncated before magic", pos)
    magic = buf[pos + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        code = (
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
            if magic in (0, 1)
            else ErrorCode.CORRUPT_MESSAGE
        )
        raise RecordsError(code, f"record batch magic {magic} is not supported", pos)
    size = batch_length + LOG_OVERHEAD
    if size < RECORD_BATCH_OVERHEAD:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE, f"batch size {size} below v2 header size", pos
        )
    if size > remaining:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE,
            f"batch of {size} bytes truncated to {remaining} bytes",
            pos,
        )
    header = BatchHeader(pos, *_HEADER.unpack_from(buf, pos))
    if header.records_count < 0:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE, f"negative record count {header.records_count}", pos
        )
    if header.last_offset_delta < 0 or header.last_offset_delta < header.records_count - 1:
        raise RecordsError(
            ErrorCode.CORRUPT_MESSAGE,
            f"last offset delta {header.last_offset_delta} inconsistent with "
            f"{header.records_count} records",
            pos,
        )
    if verify_crc:
        actual = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
        if actual != header.crc:
            raise RecordsError(
                ErrorCode.CORRUPT_MESSAGE,
                f"CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}",
                pos,
            )
    return header


def valid_batches_prefix(buf: Buffer, first_min: int, last_max: int) -> tuple[int, int]:
    """Length of the longest prefix of ``buf`` made of whole batches that each pass
    ``check_batch`` (CRC included), follow each other without an offset gap, and lie within
    offsets ``[first_min, last_max]``; and the last offset of that prefix (-1 if empty).

    The checks of ``check_batch`` are made here inline, from one unpack of the header per
    batch: a served remote read checks every batch it sends, and with small batches (16 KiB
    and less) the per-batch Python work of building a header and raising on failure was
    most of its cost. A batch this fast path does not accept is handed to ``check_batch``
    itself, which decides, so the result is the same as checking each batch with it."""
    view = memoryview(buf)
    end = len(view)
    pos = 0
    last = -1
    expected: int | None = None
    while end - pos >= RECORD_BATCH_OVERHEAD:
        fields = _HEADER.unpack_from(view, pos)
        base, length, magic, crc, delta, count = (
            fields[0],
            fields[1],
            fields[3],
            fields[4],
            fields[6],
            fields[12],
        )
        size = length + LOG_OVERHEAD
        if (
            magic == CURRENT_MAGIC
            and RECORD_BATCH_OVERHEAD <= size <= end - pos
            and count >= 0
            and delta >= 0
            and delta >= count - 1
            and (base == expected if expected is not None else True)
            and first_min <= base
            and base + delta <= last_max
            and crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) == crc
        ):
            pos += size
            last = base + delta
            expected = last + 1
            continue
        try:
            h = check_batch(view, pos, end)
        except RecordsError:
            break
        if (expected is not None and h.base_offset != expected) or not (
            first_min <= h.base_offset <= h.last_offset <= last_max
        ):
            break
        pos = h.end
        last = h.last_offset
        expected = last + 1
    return pos, last


def whole_batches_length(buf: Buffer, start: int = 0) -> int:
    """Length of the longest prefix of ``buf[start:]`` made of whole batches (lengths only).

    Used to cut a byte range read from a segment at a batch boundary; the batches were
    validated when appended, so only the length fields are walked.
    """
    limit = len(buf)
    pos = start
    while limit - pos >= LOG_OVERHEAD:
        _, batch_length = _PREFIX.unpack_from(buf, pos)
        nxt = pos + batch_length + LOG_OVERHEAD
        if batch_length < 0 or nxt > limit:
            break
        pos = nxt
    return pos - start


def batch_size_at(buf: Buffer, pos: int = 0) -> int:
    """Size of the batch at ``pos`` from its length field alone (``buf`` holds at least
    ``LOG_OVERHEAD`` bytes there); may be garbage where the batches end."""
    _, batch_length = _PREFIX.unpack_from(buf, pos)
    return int(batch_length) + LOG_OVERHEAD


def header_at(buf: Buffer, pos: int = 0) -> BatchHeader | None:
    """The header of the batch at ``pos``, unvalidated, or None where the batches end: fewer
    than ``RECORDS_OFFSET`` bytes left, or a length field no v2 batch can have (trailing
    garbage, or the zeros of a preallocated file)."""
    if len(buf) - pos < RECORDS_OFFSET:
        return None
    if batch_size_at(buf, pos) < RECORDS_OFFSET:
        return None
    return read_header(buf, pos)


def walk_headers(
    read_at: Callable[[int, int], Buffer], start: int, end: int
) -> Iterator[BatchHeader]:
    """Headers of the whole batches in ``[start, end)`` of a file, with their positions,
    reading only ``RECORDS_OFFSET`` bytes per batch through ``read_at(position, size)``.

    Lengths only, nothing validated: for batches validated when they were written. Stops
    where the batches end (see ``header_at``) or at a batch reaching past ``end``.
    """
    pos = start
    while pos + RECORDS_OFFSET <= end:
        h = header_at(read_at(pos, RECORDS_OFFSET))
        if h is None or pos + h.size > end:
            return
        yield h._replace(position=pos)
        pos += h.size


def scan_batches(
    buf: Buffer, start: int = 0, end: int | None = None, *, verify_crc: bool = True
) -> list[BatchHeader]:
    """Validate and list every batch in ``buf[start:end]``, which must hold whole batches only.

    Raises ``RecordsError`` at the first problem; a trailing partial batch is an error here
    because a produce request that ends mid-batch was damaged in flight.
    """
    limit = len(buf) if end is None else end
    headers: list[BatchHeader] = []
    pos = start
    while pos < limit:
        header = check_batch(buf, pos, limit, verify_crc)
        headers.append(header)
        pos = header.end
    return headers


class PrefixScan(NamedTuple):
    """Result of scanning a possibly torn log: the valid batches, where they end, and why."""

    headers: list[BatchHeader]
    valid_end: int
    error: RecordsError | None


def scan_valid_prefix(
    buf: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    min_offset: int | None = None,
    verify_crc: bool = True,
) -> PrefixScan:
    """Scan until the first invalid batch, for recovery of a segment after a crash.

    ``min_offset`` additionally requires offsets to increase (a batch whose base offset falls
    below the previous batch's next offset is treated as corruption, as Kafka's recovery does).
    """
    limit = len(buf) if end is None else end
    headers: list[BatchHeader] = []
    pos = start
    expected = min_offset
    while pos < limit:
        try:
            header = check_batch(buf, pos, limit, verify_crc)
        except RecordsError as exc:
            return PrefixScan(headers, pos, exc)
        if expected is not None and header.base_offset < expected:
            return PrefixScan(
                headers,
                pos,
                RecordsError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"base offset {header.base_offset} below expected {expected}",
                    pos,
                ),
            )
        expected = header.next_offset
        headers.append(header)
        pos = header.end
    return PrefixScan(headers, pos, None)


def validate_client_batch(header: BatchHeader) -> None:
    """Extra checks Kafka's LogValidator applies to batches that come from a producer."""
    if header.records_count <= 0:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"invalid reported count for record batch: {header.records_count}",
            header.position,
        )
    if header.last_offset_delta != header.records_count - 1:
        raise RecordsError(
            ErrorCode.INVALID_RECORD,
            f"inconsistent batch offset range: last offset delta {header.last_offset_delta} "
            f"for {header.records_count} records",
            header.position,
        )
    if header.is_control:
        raise RecordsError(
            ErrorCode.INVALID_RECORD, "clients may not send control batches", header.position
        )


# --- in-place patching -------------------------------------------------------------------


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Outside the CRC: no checksum update needed."""
    _I64.pack_into(buf, position + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Outside the CRC: no checksum update needed."""
    _I32.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, header: BatchHeader, now_ms: int) -> None:
    """Mark the batch LogAppendTime with ``now_ms`` as max timestamp and re-sign it.

    Record-level timestamps stay as the client wrote them; readers use the batch max
    timestamp for every record of a LogAppendTime batch, as Kafka does.
    """
    pos = header.position
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, header.end))


def set_log_append_time_split(header: bytearray, body: Buffer, now_ms: int) -> None:
    """``set_log_append_time`` for a batch held as a separate 61-byte header and body.

    The append path writes a patched copy of the header followed by a view of the client's
    body, so the CRC is computed over both pieces without joining them.
    """
    (attributes,) = _I16.unpack_from(header, ATTRIBUTES_OFFSET)
    _I16.pack_into(header, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(header, MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c.crc32c(memoryview(header)[ATTRIBUTES_OFFSET:RECORDS_OFFSET])
    crc = crc32c.crc32c(body, crc)
    _U32.pack_into(header, CRC_OFFSET, crc)


# --- record-level codec (tools and tests only) -------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def decompress(codec: Compression, data: bytes) -> bytes:
    """Inflate a batch's records section with the batch's codec."""
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec is Compression.SNAPPY:
        if data.startswith(_XERIAL_MAGIC):
            # Java's snappy-java stream framing: 16-byte header, then [u32 len][raw block]*.
            out = bytearray()
            pos = 16
            while pos < len(data):
                (n,) = _U32.unpack_from(data, pos)
                out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n]))
                pos += 4 + n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec is Compression.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise RecordsError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec {codec}")


def compress(codec: Compression, data: bytes) -> bytes:
    """Deflate a records section the way Java clients frame it (xerial snappy, LZ4 frame)."""
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is Compression.SNAPPY:
        block = bytes(cramjam.snappy.compress_raw(data))
        return _XERIAL_MAGIC + _I32.pack(1) + _I32.pack(1) + _U32.pack(len(block)) + block
    if codec is Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise RecordsError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec {codec}")


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if pos >= len(data):
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "varint runs past end of records")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "varint too long")
    return (raw >> 1) ^ -(raw & 1), pos


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    raw &= (1 << 64) - 1
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(data, pos)
    if n < 0:
        return None, pos
    if pos + n > len(data):
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record field runs past end of records")
    return data[pos : pos + n], pos + n


def iter_records(batch: Buffer, header: BatchHeader | None = None) -> Iterator[Record]:
    """Decode every record of one whole batch (any codec); for tools, not the hot path."""
    h = header if header is not None else read_header(batch, 0)
    raw = bytes(memoryview(batch)[h.position + RECORDS_OFFSET : h.end])
    data = decompress(h.compression, raw)
    log_append = h.timestamp_type is TimestampType.LOG_APPEND_TIME
    pos = 0
    for _ in range(h.records_count):
        length, pos = _read_varint(data, pos)
        end = pos + length
        if end > len(data):
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record runs past end of batch")
        pos += 1  # record attributes, unused in v2
        ts_delta, pos = _read_varint(data, pos)
        off_delta, pos = _read_varint(data, pos)
        key, pos = _read_bytes(data, pos)
        value, pos = _read_bytes(data, pos)
        n_headers, pos = _read_varint(data, pos)
        hdrs: list[tuple[str, bytes | None]] = []
        for _h in range(max(n_headers, 0)):
            hkey, pos = _read_bytes(data, pos)
            hval, pos = _read_bytes(data, pos)
            hdrs.append(((hkey or b"").decode("utf-8", "replace"), hval))
        if pos != end:
            raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record length does not match body")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        yield Record(h.base_offset + off_delta, ts, key, value, tuple(hdrs))


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """Input to ``build_batch``: what a producer would send for one record."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def build_batch(
    records: Sequence[SimpleRecord | bytes],
    *,
    base_offset: int = 0,
    timestamp: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """Encode a v2 batch; ``timestamp`` is used for records that carry none."""
    recs = [r if isinstance(r, SimpleRecord) else SimpleRecord(r) for r in records]
    stamps = [timestamp if r.timestamp is None else r.timestamp for r in recs]
    base_ts = min(stamps) if stamps else timestamp
    max_ts = max(stamps) if stamps else timestamp
    body = bytearray()
    for delta, (rec, ts) in enumerate(zip(recs, stamps, strict=True)):
        rb = bytearray(b"\x00")
        _write_varint(rb, ts - base_ts)
        _write_varint(rb, delta)
        for field in (rec.key, rec.value):
            if field is None:
                _write_varint(rb, -1)
            else:
                _write_varint(rb, len(field))
                rb += field
        _write_varint(rb, len(rec.headers))
        for hk, hv in rec.headers:
            kb = hk.encode()
            _write_varint(rb, len(kb))
            rb += kb
            if hv is None:
                _write_varint(rb, -1)
            else:
                _write_varint(rb, len(hv))
                rb += hv
        _write_varint(body, len(rb))
        body += rb
    payload = compress(compression, bytes(body))
    attributes = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    size = RECORDS_OFFSET + len(payload)
    out = bytearray(size)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        max(len(recs) - 1, 0),
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    )
    out[RECORDS_OFFSET:] = payload
    _U32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, size))
    return bytes(out)


def next_offset_after(buf: Buffer) -> int | None:
    """The offset after the last whole batch in ``buf`` (which starts at a batch), walking
    length fields and reading one header; None when ``buf`` holds no whole batch."""
    pos = 0
    last = -1
    limit = len(buf)
    while limit - pos >= LOG_OVERHEAD:
        size = batch_size_at(buf, pos)
        if size < RECORDS_OFFSET or pos + size > limit:
            break
        last = pos
        pos += size
    return None if last < 0 else read_header(buf, last).next_offset
