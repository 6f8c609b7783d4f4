"""Kafka's record formats for ``__transaction_state`` and for transaction markers.

``__transaction_state`` holds one record per write of a transactional id's metadata. The key
is ``TransactionLogKey`` v0: an int16 version (0) and the transactional id as a classic
string (int16 length, UTF-8). The value is ``TransactionLogValue``: an int16 version, then
v0 (classic encoding) or v1 (Kafka's flexible encoding: unsigned-varint lengths plus one,
a tagged-field section after every struct). v1 carries three tagged fields, each written
only when it differs from its default: PreviousProducerId (tag 0, default -1),
NextProducerId (tag 1, default -1) and ClientTransactionVersion (tag 2, default 0). A
``None`` value is a tombstone, written when a transactional id expires. The partition list
is null when the transaction has no partitions (Kafka writes null for Empty). Keys of an
unknown version decode to ``None`` so that a reader can skip them, as Kafka's loader does.

The transaction marker formats live in ``tierlog.protocol.txn_markers`` (the log validates
and indexes markers too) and are re-exported here for the coordinator.

We write the same bytes as Apache Kafka so that Kafka's own tools read our logs and a log Kafka
wrote loads here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tierlog.protocol.txn_markers import (
    CONTROL_RECORD_KEY_VERSION,
    END_TXN_MARKER_VERSION,
    ControlRecordType,
    EndTxnMarker,
    TxnSchemaError,
    build_marker_batch,
    control_record_type,
    decode_marker,
    encode_marker_key,
    encode_marker_value,
)
from tierlog.server.group.schema import partition_for

__all__ = [
    "CONTROL_RECORD_KEY_VERSION",
    "END_TXN_MARKER_VERSION",
    "ControlRecordType",
    "EndTxnMarker",
    "TxnSchemaError",
    "build_marker_batch",
    "control_record_type",
    "decode_marker",
    "encode_marker_key",
    "encode_marker_value",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
DEFAULT_NUM_PARTITIONS = 50

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSIONS = (0, 1)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def coordinator_partition(
    transactional_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS
) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``: Kafka places transactional
    ids exactly as it places groups, ``Utils.abs(id.hashCode) % num_partitions``."""
    return partition_for(transactional_id, num_partitions)


# --- __transaction_state ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One ``TransactionLogValue``. ``partitions`` maps topic to sorted partition ids; an empty
    mapping is written as a null array. ``state`` is the state id (``TxnState.value``)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    last_update_ms: int
    start_ms: int
    prev_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(TRANSACTION_LOG_KEY_VERSION) + _I16.pack(len(raw)) + raw


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key, or ``None`` for a key version we do not know."""
    r = _Reader(data)
    version = r.i16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        return None
    length = r.i16()
    if length < 0:
        raise TxnSchemaError("null transactional id in a __transaction_state key")
    tid = r.raw(length).decode()
    r.done()
    return tid


def encode_value(value: TxnLogValue | None, version: int = 1) -> bytes | None:
    """``None`` (a tombstone) stays ``None``; ``version`` 0 is for transaction version 0."""
    if value is None:
        return None
    if version not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise TxnSchemaError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.timeout_ms)
    out += _I8.pack(value.state)
    parts = value.partitions
    if flexible:
        _uvarint(out, 0 if not parts else len(parts) + 1)
    else:
        out += _I32.pack(-1 if not parts else len(parts))
    for topic, ids in parts:
        raw = topic.encode()
        if flexible:
            _uvarint(out, len(raw) + 1)
            out += raw
            _uvarint(out, len(ids) + 1)
        else:
            out += _I16.pack(len(raw)) + raw
            out += _I32.pack(len(ids))
        for pid in ids:
            out += _I32.pack(pid)
        if flexible:
            _uvarint(out, 0)
    out += _I64.pack(value.last_update_ms)
    out += _I64.pack(value.start_ms)
    if flexible:
        tagged: list[tuple[int, bytes]] = []
        if value.prev_producer_id != -1:
            tagged.append((0, _I64.pack(value.prev_producer_id)))
        if value.next_producer_id != -1:
            tagged.append((1, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tagged.append((2, _I16.pack(value.client_transaction_version)))
        _uvarint(out, len(tagged))
        for tag, body in tagged:
            _uvarint(out, tag)
            _uvarint(out, len(body))
            out += body
    return bytes(out)


def decode_value(data: bytes | None) -> TxnLogValue | None:
    if data is None:
        return None
    r = _Reader(data)
    version = r.i16()
    if version not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise TxnSchemaError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    producer_id = r.i64()
    epoch = r.i16()
    timeout_ms = r.i32()
    state = r.i8()
    count = r.uvarint() - 1 if flexible else r.i32()
    parts: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(max(count, 0)):
        length = r.uvarint() - 1 if flexible else r.i16()
        if length < 0:
            raise TxnSchemaError("null topic in TransactionLogValue")
        topic = r.raw(length).decode()
        n = r.uvarint() - 1 if flexible else r.i32()
        if n < 0:
            raise TxnSchemaError("null partition list in TransactionLogValue")
        ids = tuple(r.i32() for _ in range(n))
        if flexible:
            r.skip_tagged()
        parts.append((topic, ids))
    last_update_ms = r.i64()
    start_ms = r.i64()
    prev_pid, next_pid, ctv = -1, -1, 0
    if flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            body = r.raw(size)
            if tag == 0:
                prev_pid = _I64.unpack(body)[0]
            elif tag == 1:
                next_pid = _I64.unpack(body)[0]
            elif tag == 2:
                ctv = _I16.unpack(body)[0]
    r.done()
    return TxnLogValue(
        producer_id=producer_id,
        producer_epoch=epoch,
        timeout_ms=timeout_ms,
        state=state,
        partitions=tuple(parts),
        last_update_ms=last_update_ms,
        start_ms=start_ms,
        prev_producer_id=prev_pid,
        next_producer_id=next_pid,
        client_transaction_version=ctv,
    )


# --- encoding helpers -------------------------------------------------------------------------


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class _Reader:
    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def raw(self, n: int) -> bytes:
        end = self._pos + n
        if end > len(self._data):
            raise TxnSchemaError("record truncated")
        out = self._data[self._pos : end]
        self._pos = end
        return out

    def i8(self) -> int:
        return int(_I8.unpack(self.raw(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.raw(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.raw(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.raw(8))[0])

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self.raw(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise TxnSchemaError("unsigned varint too long")

    def skip_tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())

    def done(self) -> None:
        if self._pos != len(self._data):
            raise TxnSchemaError(f"{len(self._data) - self._pos} trailing bytes")
