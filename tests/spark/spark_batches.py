"""Record batches built by real client libraries, for decoder and source tests.

Offsets are assigned the way a broker does it: by patching the 8-byte base offset, which
sits outside the CRC.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import aiokafka.record.default_records as aio
import cramjam
import kafka.record.default_records as kp
from crc32c import crc32c

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Rec:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


def with_base_offset(batch: bytes, base: int) -> bytes:
    return struct.pack(">q", base) + batch[8:]


def with_attributes(batch: bytes, set_bits: int, max_ts: int | None = None) -> bytes:
    """Set attribute bits (e.g. control, log-append-time) and re-seal the CRC."""
    b = bytearray(batch)
    (attr,) = struct.unpack_from(">h", b, 21)
    struct.pack_into(">h", b, 21, attr | set_bits)
    if max_ts is not None:
        struct.pack_into(">q", b, 35, max_ts)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


def build(
    records: list[Rec], codec: int, builder: str = "aiokafka", transactional: bool = False
) -> bytes:
    """One batch holding `records` (consecutive offsets expected from records[0].offset)."""
    cls = aio.DefaultRecordBatchBuilder if builder == "aiokafka" else kp.DefaultRecordBatchBuilder
    pid, epoch, seq = (1000, 0, 0) if transactional else (-1, -1, -1)
    b = cls(2, codec, int(transactional), pid, epoch, seq, 1 << 30)
    base = records[0].offset
    for r in records:
        b.append(r.offset - base, r.timestamp, r.key, r.value, r.headers)
    return with_base_offset(bytes(b.build()), base)


def raw_snappy_batch(records: list[Rec]) -> bytes:
    """A snappy batch as librdkafka writes it: one raw block, no xerial framing."""
    plain = build(records, 0)
    inner = bytes(cramjam.snappy.compress_raw(plain[61:]))
    head = bytearray(plain[:61])
    struct.pack_into(">i", head, 8, 61 - 12 + len(inner))
    (attr,) = struct.unpack_from(">h", head, 21)
    struct.pack_into(">h", head, 21, attr | 2)
    body = bytes(head[21:]) + inner
    struct.pack_into(">I", head, 17, crc32c(body))
    return bytes(head[:21]) + body


def control_batch(offset: int, timestamp: int, commit: bool) -> bytes:
    """A transaction marker: control bit set, one record whose key says COMMIT or ABORT."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    b = build([Rec(offset, timestamp, key, value)], 0, transactional=True)
    return with_attributes(b, 0x20)
