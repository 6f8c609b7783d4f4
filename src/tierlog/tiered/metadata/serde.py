"""Binary encoding of ``__remote_log_metadata`` record values and snapshot entries.

Layout: ``kind:u8 version:u8 body``, all integers big-endian. Kinds follow Kafka's apiKeys:
0 segment metadata, 1 segment update, 2 partition delete, 3 partition snapshot (tierlog's
own: a user partition's full cache state, see ``PartitionSnapshot``). Every kind is at
version 0. A reader meeting a newer version fails loudly rather than guessing, because
silently misreading metadata would corrupt the view of what is in the remote tier.
Any body change must bump that kind's version and keep decoding the old ones.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from tierlog.tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from tierlog.tiered.metadata.partition_snapshot import EpochSnapshot, PartitionSnapshot

MetadataRecord = (
    RemoteLogSegmentMetadata
    | RemoteLogSegmentMetadataUpdate
    | RemotePartitionDeleteMetadata
    | PartitionSnapshot
)

KIND_SEGMENT = 0
KIND_UPDATE = 1
KIND_PARTITION_DELETE = 2
KIND_SNAPSHOT = 3

_NAMES = {
    KIND_SEGMENT: "RemoteLogSegmentMetadata",
    KIND_UPDATE: "RemoteLogSegmentMetadataUpdate",
    KIND_PARTITION_DELETE: "RemotePartitionDeleteMetadata",
    KIND_SNAPSHOT: "PartitionSnapshot",
}
_LATEST_VERSION = dict.fromkeys(_NAMES, 0)

_HDR = struct.Struct(">BB")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_B = struct.Struct(">B")
# start, end, max_ts, broker, event_ts, size, state, txn_idx_empty
_SEG = struct.Struct(">qqqiqqBB")
# segment id, the _SEG fields, number of leader epochs: decoded in one call
_SEG_HEAD = struct.Struct(">16sqqqiqqBBI")
_EPOCH_ENTRY = struct.Struct(">iq")
# broker, event_ts, state
_EVENT = struct.Struct(">iqB")
_REF = struct.Struct(">q16s")


def _uuid(b: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=b)`` without its argument checks, which dominate snapshot loading
    (a restart decodes one id per remote segment); ``b`` is always exactly 16 bytes here."""
    u = object.__new__(uuid.UUID)
    object.__setattr__(u, "int", int.from_bytes(b, "big"))
    object.__setattr__(u, "is_safe", uuid.SafeUUID.unknown)
    return u


class MetadataSerdeError(ValueError):
    """A metadata record cannot be decoded (unknown kind or version, or corrupt bytes)."""


# -- encoding --------------------------------------------------------------------------------


def serialize(record: MetadataRecord) -> bytes:
    out = bytearray()
    if isinstance(record, RemoteLogSegmentMetadata):
        out += _HDR.pack(KIND_SEGMENT, 0)
        _put_tip(out, record.topic_id_partition)
        _put_segment(out, record)
    elif isinstance(record, RemoteLogSegmentMetadataUpdate):
        out += _HDR.pack(KIND_UPDATE, 0)
        _put_tip(out, record.topic_id_partition)
        out += record.remote_log_segment_id.id.bytes
        out += _EVENT.pack(record.broker_id, record.event_timestamp_ms, record.state.id)
        _put_custom(out, record.custom_metadata)
    elif isinstance(record, RemotePartitionDeleteMetadata):
        out += _HDR.pack(KIND_PARTITION_DELETE, 0)
        _put_tip(out, record.topic_id_partition)
        out += _EVENT.pack(record.broker_id, record.event_timestamp_ms, record.state.id)
    elif isinstance(record, PartitionSnapshot):
        out += _HDR.pack(KIND_SNAPSHOT, 0)
        _put_snapshot(out, record)
    else:
        raise TypeError(f"not a metadata record: {type(record).__name__}")
    return bytes(out)


def _put_tip(out: bytearray, tip: TopicIdPartition) -> None:
    name = tip.topic.encode()
    out += tip.topic_id.bytes
    out += _U16.pack(len(name))
    out += name
    out += _I32.pack(tip.partition)


def _put_custom(out: bytearray, custom: CustomMetadata | None) -> None:
    if custom is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(custom.value))
        out += custom.value


def _put_segment(out: bytearray, m: RemoteLogSegmentMetadata) -> None:
    """Everything but the partition (which the enclosing record or snapshot carries)."""
    out += m.remote_log_segment_id.id.bytes
    out += _SEG.pack(
        m.start_offset,
        m.end_offset,
        m.max_timestamp_ms,
        m.broker_id,
        m.event_timestamp_ms,
        m.segment_size_in_bytes,
        m.state.id,
        m.txn_idx_empty,
    )
    out += _U32.pack(len(m.segment_leader_epochs))
    for epoch, offset in m.segment_leader_epochs.items():
        out += _EPOCH_ENTRY.pack(epoch, offset)
    _put_custom(out, m.custom_metadata)


def _put_snapshot(out: bytearray, s: PartitionSnapshot) -> None:
    _put_tip(out, s.topic_id_partition)
    out += _I64.pack(s.covered_offset)
    d = s.delete_metadata
    if d is None:
        out += _B.pack(0)
    else:
        if d.topic_id_partition != s.topic_id_partition:
            raise ValueError("snapshot delete metadata is for another partition")
        out += _B.pack(1)
        out += _EVENT.pack(d.broker_id, d.event_timestamp_ms, d.state.id)
    out += _U32.pack(len(s.segments))
    for m in s.segments:
        if m.topic_id_partition != s.topic_id_partition:
            raise ValueError("snapshot segment belongs to another partition")
        _put_segment(out, m)
    out += _U32.pack(len(s.epochs))
    for e in s.epochs:
        out += _I32.pack(e.epoch)
        if e.highest_log_offset is None:
            out += _B.pack(0)
        else:
            out += _B.pack(1)
            out += _I64.pack(e.highest_log_offset)
        out += _U32.pack(len(e.referenced))
        for start, u in e.referenced:
            out += _REF.pack(start, u.bytes)
        out += _U32.pack(len(e.unreferenced))
        for u in e.unreferenced:
            out += u.bytes


# -- decoding --------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, s: struct.Struct) -> tuple[Any, ...]:
        v = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def raw(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.buf):
            raise struct.error("truncated")
        b = self.buf[self.pos : end]
        self.pos = end
        return b

    def uuid(self) -> uuid.UUID:
        return _uuid(self.raw(16))

    def tip(self) -> TopicIdPartition:
        topic_id = self.uuid()
        (n,) = self.take(_U16)
        name = self.raw(n).decode()
        (partition,) = self.take(_I32)
        return TopicIdPartition(topic_id, name, partition)

    def custom(self) -> CustomMetadata | None:
        (n,) = self.take(_I32)
        return None if n < 0 else CustomMetadata(self.raw(n))

    def segment(self, tip: TopicIdPartition) -> RemoteLogSegmentMetadata:
        raw_id, start, end, max_ts, broker, event_ts, size, state, txn, n = self.take(_SEG_HEAD)
        sid = RemoteLogSegmentId(tip, _uuid(raw_id))
        epochs = dict(_EPOCH_ENTRY.iter_unpack(self.raw(n * _EPOCH_ENTRY.size)))
        return RemoteLogSegmentMetadata(
            remote_log_segment_id=sid,
            start_offset=start,
            end_offset=end,
            max_timestamp_ms=max_ts,
            broker_id=broker,
            event_timestamp_ms=event_ts,
            segment_size_in_bytes=size,
            custom_metadata=self.custom(),
            state=RemoteLogSegmentState.for_id(state),
            segment_leader_epochs=epochs,
            txn_idx_empty=bool(txn),
        )


def deserialize(data: bytes) -> MetadataRecord:
    if len(data) < _HDR.size:
        raise MetadataSerdeError(f"metadata record too short ({len(data)} bytes)")
    kind, version = _HDR.unpack_from(data)
    name = _NAMES.get(kind)
    if name is None:
        raise MetadataSerdeError(f"unknown __remote_log_metadata record kind {kind}")
    if version > _LATEST_VERSION[kind]:
        raise MetadataSerdeError(
            f"unsupported version {version} of {name} record (kind {kind}); this tierlog "
            f"reads versions up to {_LATEST_VERSION[kind]}, upgrade it to read this topic"
        )
    r = _Reader(bytes(data))
    r.pos = _HDR.size
    try:
        record = _decode_body(kind, r)
    except (struct.error, UnicodeDecodeError, ValueError, TypeError) as e:
        raise MetadataSerdeError(f"corrupt {name} record: {e}") from e
    if r.pos != len(data):
        raise MetadataSerdeError(f"{len(data) - r.pos} trailing bytes after {name} record")
    return record


def _decode_body(kind: int, r: _Reader) -> MetadataRecord:
    if kind == KIND_SEGMENT:
        return r.segment(r.tip())
    if kind == KIND_UPDATE:
        tip = r.tip()
        sid = RemoteLogSegmentId(tip, r.uuid())
        broker, event_ts, state = r.take(_EVENT)
        return RemoteLogSegmentMetadataUpdate(
            sid, event_ts, r.custom(), RemoteLogSegmentState.for_id(state), broker
        )
    if kind == KIND_PARTITION_DELETE:
        tip = r.tip()
        broker, event_ts, state = r.take(_EVENT)
        return RemotePartitionDeleteMetadata(
            tip, RemotePartitionDeleteState.for_id(state), event_ts, broker
        )
    return _decode_snapshot(r)


def _decode_snapshot(r: _Reader) -> PartitionSnapshot:
    tip = r.tip()
    (covered,) = r.take(_I64)
    (has_delete,) = r.take(_B)
    delete = None
    if has_delete:
        broker, event_ts, state = r.take(_EVENT)
        delete = RemotePartitionDeleteMetadata(
            tip, RemotePartitionDeleteState.for_id(state), event_ts, broker
        )
    (n,) = r.take(_U32)
    segments = tuple(r.segment(tip) for _ in range(n))
    # epoch entries name segments by id: reuse the segments' UUID objects
    known = {m.remote_log_segment_id.id.bytes: m.remote_log_segment_id.id for m in segments}

    def ident(b: bytes) -> uuid.UUID:
        u = known.get(b)
        return _uuid(b) if u is None else u

    (n,) = r.take(_U32)
    epochs = []
    for _ in range(n):
        (epoch,) = r.take(_I32)
        (has_highest,) = r.take(_B)
        highest = r.take(_I64)[0] if has_highest else None
        (nref,) = r.take(_U32)
        ref = tuple((start, ident(b)) for start, b in _REF.iter_unpack(r.raw(nref * _REF.size)))
        (nunref,) = r.take(_U32)
        raw = r.raw(nunref * 16)
        unref = tuple(ident(raw[i : i + 16]) for i in range(0, len(raw), 16))
        epochs.append(EpochSnapshot(epoch, highest, ref, unref))
    return PartitionSnapshot(tip, covered, delete, segments, tuple(epochs))
