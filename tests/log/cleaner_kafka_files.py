"""A partition directory laid out byte for byte as Apache Kafka's broker writes one.

No Kafka distribution can be fetched on this machine, so the real-Kafka acceptance point is
approached with the closest honest substitute: this module writes the files itself, from
Kafka's on-disk formats (message format v2, ``LogSegment.append``/``roll``/``close``,
``ProducerStateManager`` snapshot v1, the epoch checkpoint, ``partition.metadata``), and
with what tierlog's own writer never produces:

* batches from several producers: idempotent ones (their own ids, epochs, sequences), a
  transactional one whose transaction ends with a COMMIT control batch, and a plain one;
* ``LogAppendTime`` batches as Kafka's ``LogValidator`` stamps them in place (timestamp type
  bit and max timestamp set to the append time, base timestamp and deltas left as sent);
* gzip and zstd batches compressed by the codec libraries directly, record headers;
* several partition leader epochs, with the ``leader-epoch-checkpoint`` that matches;
* Kafka's index rule (an entry for an append's *last* offset at the append's position once
  more than ``index.interval.bytes`` were appended since the last one), the time index's
  final entry written when a segment rolls or closes, indexes trimmed on roll and close,
  and a producer snapshot named by each roll's offset and by the log end at close.

The batches are encoded here from the format spec, not by ``tierlog.protocol``.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import cramjam
import crc32c

NONE, GZIP, ZSTD = 0, 1, 4
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(value: int) -> bytes:
    raw = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


@dataclass(frozen=True)
class KRecord:
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[bytes, bytes | None], ...] = ()


def _record(r: KRecord, offset_delta: int, base_ts: int) -> bytes:
    body = (
        b"\x00"
        + _varint(r.timestamp - base_ts)
        + _varint(offset_delta)
        + _field(r.key)
        + _field(r.value)
        + _varint(len(r.headers))
        + b"".join(_field(k) + _field(v) for k, v in r.headers)
    )
    return _varint(len(body)) + body


def encode_batch(
    base_offset: int,
    records: list[KRecord],
    *,
    leader_epoch: int,
    codec: int = NONE,
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
) -> bytes:
    """One v2 batch; ``producer`` is (id, epoch, base sequence)."""
    base_ts = records[0].timestamp
    raw = b"".join(_record(r, i, base_ts) for i, r in enumerate(records))
    if codec == GZIP:
        raw = bytes(cramjam.gzip.compress(raw))
    elif codec == ZSTD:
        raw = bytes(cramjam.zstd.compress(raw))
    attributes = codec
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    max_ts = max(r.timestamp for r in records)
    if log_append_time is not None:
        attributes |= TIMESTAMP_TYPE_BIT
        max_ts = log_append_time
    pid, epoch, seq = producer
    size = _HEADER.size + len(raw)
    out = bytearray(size)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        size - 12,
        leader_epoch,
        2,
        0,
        attributes,
        len(records) - 1,
        base_ts,
        max_ts,
        pid,
        epoch,
        seq,
        len(records),
    )
    out[_HEADER.size :] = raw
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def commit_marker(
    offset: int, pid: int, epoch: int, ts: int, leader_epoch: int, coordinator_epoch: int
) -> bytes:
    """Kafka's COMMIT control batch (key: version 0, type 1; value: version 0, epoch)."""
    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return encode_batch(
        offset,
        [KRecord(key, value, ts)],
        leader_epoch=leader_epoch,
        producer=(pid, epoch, -1),
        transactional=True,
        control=True,
    )


@dataclass
class _ProducerEntry:
    epoch: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    txn_first_offset: int = -1


@dataclass
class _Segment:
    base: int
    log: bytearray = field(default_factory=bytearray)
    index: bytearray = field(default_factory=bytearray)
    time_index: bytearray = field(default_factory=bytearray)
    since_index: int = 0
    max_ts: int = -1
    max_ts_offset: int = -1
    last_time_entry: int = -1

    def time_entry(self) -> None:
        """``TimeIndex.maybeAppend``: only a timestamp larger than the last entry's."""
        if self.max_ts > self.last_time_entry:
            self.time_index += struct.pack(">qi", self.max_ts, self.max_ts_offset - self.base)
            self.last_time_entry = self.max_ts


class KafkaPartitionWriter:
    """Appends whole batches as Kafka's ``UnifiedLog.append`` lays them out on disk."""

    def __init__(
        self, directory: Path, topic_id: uuid.UUID, segment_bytes: int, index_interval: int
    ) -> None:
        self.dir = directory
        self.topic_id = topic_id
        self.segment_bytes = segment_bytes
        self.index_interval = index_interval
        self.segments = [_Segment(0)]
        self.next_offset = 0
        self.epochs: list[tuple[int, int]] = []
        self.producers: dict[int, _ProducerEntry] = {}
        self.snapshots: dict[int, bytes] = {}

    def append(self, batch: bytes) -> None:
        (base, _len, leader_epoch, _m, _c, attrs, last_delta, _bts, max_ts, pid, epoch, seq, _n) = (
            _HEADER.unpack_from(batch, 0)
        )
        assert base == self.next_offset
        last = base + last_delta
        seg = self.segments[-1]
        if len(seg.log) + len(batch) > self.segment_bytes:
            self._roll()
            seg = self.segments[-1]
        if not self.epochs or leader_epoch > self.epochs[-1][0]:
            self.epochs.append((leader_epoch, base))
        position = len(seg.log)
        seg.log += batch
        if max_ts > seg.max_ts:
            seg.max_ts, seg.max_ts_offset = max_ts, last
        if seg.since_index > self.index_interval:
            seg.index += struct.pack(">ii", last - seg.base, position)
            seg.time_entry()
            seg.since_index = 0
        seg.since_index += len(batch)
        if pid >= 0:
            entry = self.producers.get(pid)
            if attrs & CONTROL_BIT:
                assert entry is not None
                (coordinator_epoch,) = struct.unpack_from(">i", batch, len(batch) - 4)
                entry.coordinator_epoch = coordinator_epoch
                entry.txn_first_offset = -1
            else:
                txn_first = -1
                if attrs & TRANSACTIONAL_BIT:
                    txn_first = (
                        entry.txn_first_offset if entry and entry.txn_first_offset >= 0 else base
                    )
                coord = entry.coordinator_epoch if entry else -1
                self.producers[pid] = _ProducerEntry(
                    epoch, seq + last_delta, last, last_delta, max_ts, coord, txn_first
                )
        self.next_offset = last + 1

    def _snapshot(self) -> bytes:
        body = struct.pack(">i", len(self.producers)) + b"".join(
            struct.pack(
                ">qhiqiqiq",
                pid,
                e.epoch,
                e.last_seq,
                e.last_offset,
                e.offset_delta,
                e.timestamp,
                e.coordinator_epoch,
                e.txn_first_offset,
            )
            for pid, e in sorted(self.producers.items())
        )
        return struct.pack(">hI", 1, crc32c.crc32c(body)) + body

    def _roll(self) -> None:
        self.segments[-1].time_entry()
        self.segments.append(_Segment(self.next_offset))
        self.snapshots[self.next_offset] = self._snapshot()

    def close(self) -> None:
        """Write the directory as a cleanly stopped Kafka leaves it."""
        self.segments[-1].time_entry()
        self.snapshots[self.next_offset] = self._snapshot()
        self.dir.mkdir(parents=True, exist_ok=True)
        for seg in self.segments:
            name = f"{seg.base:020d}"
            (self.dir / f"{name}.log").write_bytes(bytes(seg.log))
            (self.dir / f"{name}.index").write_bytes(bytes(seg.index))
            (self.dir / f"{name}.timeindex").write_bytes(bytes(seg.time_index))
        for offset, data in self.snapshots.items():
            (self.dir / f"{offset:020d}.snapshot").write_bytes(data)
        lines = [f"{e} {o}" for e, o in self.epochs]
        (self.dir / "leader-epoch-checkpoint").write_text(
            "0\n" + f"{len(lines)}\n" + "".join(line + "\n" for line in lines)
        )
        b64 = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        (self.dir / "partition.metadata").write_text(f"version: 0\ntopic_id: {b64}")
