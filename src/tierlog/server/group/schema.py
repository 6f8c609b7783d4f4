"""Kafka's record schemas for the internal ``__consumer_offsets`` topic.

We write the same keys and values as Apache Kafka so that Kafka's own tools
(``kafka-dump-log --offsets-decoder``) can read our log, and so that the layout decision is
not ours to get wrong. Keys: version 1 = offset commit (group, topic, partition), version 2 =
group metadata (group). Values: offset commit v3 (offset, leader epoch, metadata, commit
timestamp) or v1 when the client asked for an explicit retention (it carries the expire
timestamp); group metadata v3, as Kafka's coordinator writes them. Every value version Kafka
defines is decoded (offset commit 0-4, group metadata 0-4), so a log Kafka wrote loads here.
A ``None`` value is a tombstone. Versions up to 3 use the classic encoding: big-endian ints,
strings with an int16 length (-1 for null), bytes with an int32 length. Version 4 of both
values is Kafka's flexible encoding: unsigned-varint lengths plus one (0 for null) and a
tagged-field section after each struct, whose fields we skip.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tierlog.server.group.model import TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class SchemaError(ValueError):
    """A ``__consumer_offsets`` record that is not in any schema version we know."""


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % n``, with Java's UTF-16 ``String.hashCode``."""
    h = 0
    utf16 = group_id.encode("utf-16-be")
    for i in range(0, len(utf16), 2):
        h = (31 * h + ((utf16[i] << 8) | utf16[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    # Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


# --- values we persist ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only for commits that asked for a retention


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


# --- primitive writers / reader ---------------------------------------------------------------


def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise SchemaError(f"string of {len(raw)} bytes is too long for an int16 length")
    out += _I16.pack(len(raw))
    out += raw


def _bytes(out: bytearray, value: bytes) -> None:
    out += _I32.pack(len(value))
    out += value


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise SchemaError("record field runs past its end")
        chunk = self.buf[self.pos : end]
        self.pos = end
        return chunk

    def i16(self) -> int:
        (v,) = _I16.unpack(self._take(2))
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack(self._take(4))
        return int(v)

    def i64(self) -> int:
        (v,) = _I64.unpack(self._take(8))
        return int(v)

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise SchemaError("null where Kafka's schema requires a string")
        return value

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._take(n)

    def uvarint(self) -> int:
        shift = 0
        value = 0
        while True:
            (b,) = self._take(1)
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise SchemaError("unsigned varint longer than five bytes")

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n).decode("utf-8")

    def compact_string(self) -> str:
        value = self.compact_nullable_string()
        if value is None:
            raise SchemaError("null where Kafka's schema requires a string")
        return value

    def compact_bytes(self) -> bytes:
        n = self.uvarint() - 1
        return b"" if n < 0 else self._take(n)

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise SchemaError(f"{len(self.buf) - self.pos} trailing bytes after record")


# --- keys -------------------------------------------------------------------------------------


def offset_key(group_id: str, tp: TopicPartition) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_KEY_VERSION))
    _string(out, group_id)
    _string(out, tp.topic)
    out += _I32.pack(tp.partition)
    return bytes(out)


def group_key(group_id: str) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_VERSION))
    _string(out, group_id)
    return bytes(out)


def decode_key(raw: bytes) -> OffsetKey | GroupKey:
    r = _Reader(raw)
    version = r.i16()
    if version in (0, 1):
        key: OffsetKey | GroupKey = OffsetKey(r.string(), r.string(), r.i32())
    elif version == 2:
        key = GroupKey(r.string())
    else:
        raise SchemaError(f"unknown __consumer_offsets key version {version}")
    r.done()
    return key


# --- offset commit values ---------------------------------------------------------------------


def offset_value(value: CommittedOffset) -> bytes:
    if value.expire_timestamp_ms is not None:
        out = bytearray(_I16.pack(1))
        out += _I64.pack(value.offset)
        _string(out, value.metadata)
        out += _I64.pack(value.commit_timestamp_ms)
        out += _I64.pack(value.expire_timestamp_ms)
        return bytes(out)
    out = bytearray(_I16.pack(3))
    out += _I64.pack(value.offset)
    out += _I32.pack(value.leader_epoch)
    _string(out, value.metadata)
    out += _I64.pack(value.commit_timestamp_ms)
    return bytes(out)


def decode_offset_value(raw: bytes) -> CommittedOffset:
    r = _Reader(raw)
    version = r.i16()
    if version == 0:
        value = CommittedOffset(r.i64(), -1, r.string(), r.i64())
    elif version == 1:
        offset, metadata, commit_ts, expire_ts = r.i64(), r.string(), r.i64(), r.i64()
        value = CommittedOffset(offset, -1, metadata, commit_ts, expire_ts)
    elif version == 2:
        value = CommittedOffset(r.i64(), -1, r.string(), r.i64())
    elif version == 3:
        value = CommittedOffset(r.i64(), r.i32(), r.string(), r.i64())
    elif version == 4:
        value = CommittedOffset(r.i64(), r.i32(), r.compact_string(), r.i64())
        r.tagged_fields()
    else:
        raise SchemaError(f"unknown offset commit value version {version}")
    r.done()
    return value


# --- group metadata values --------------------------------------------------------------------

GROUP_METADATA_VALUE_VERSION = 3


def group_value(value: GroupRecord) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    _string(out, value.protocol_type)
    out += _I32.pack(value.generation_id)
    _string(out, value.protocol_name)
    _string(out, value.leader_id)
    out += _I64.pack(value.current_state_timestamp_ms)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


def decode_group_value(raw: bytes) -> GroupRecord:
    r = _Reader(raw)
    version = r.i16()
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown group metadata value version {version}")
    flexible = version >= 4
    string = r.compact_string if flexible else r.string
    nullable_string = r.compact_nullable_string if flexible else r.nullable_string
    bytes_ = r.compact_bytes if flexible else r.bytes_
    protocol_type = string()
    generation = r.i32()
    protocol_name = nullable_string()
    leader = nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    count = r.uvarint() - 1 if flexible else r.i32()
    members = []
    for _ in range(max(count, 0)):
        member_id = string()
        instance_id = nullable_string() if version >= 3 else None
        client_id = string()
        client_host = string()
        if version >= 1:
            rebalance_timeout = r.i32()
            session_timeout = r.i32()
        else:
            session_timeout = r.i32()
            rebalance_timeout = session_timeout
        subscription = bytes_()
        assignment = bytes_()
        if flexible:
            r.tagged_fields()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    if flexible:
        r.tagged_fields()
    r.done()
    return GroupRecord(protocol_type, generation, protocol_name, leader, state_ts, tuple(members))
