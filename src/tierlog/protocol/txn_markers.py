"""Transaction markers: the control batches that end a transaction in a partition.

A marker is a v2 batch with the transactional and control attributes, the producer's id and
epoch, base sequence -1 and one record. The record's key is ``int16 version=0, int16 type``
(ABORT = 0, COMMIT = 1; other types are KRaft's and read as not a marker); its value is
``EndTxnMarker`` v0: ``int16 version, int32 coordinator epoch``. Higher value versions are
read as v0, and a value shorter than 6 bytes is invalid. Kafka's tools read the bytes this
module writes, and a log Kafka wrote loads here.

The format sits in the protocol layer because both the log (which validates and indexes the
markers it appends or replays) and the coordinator (which decides them) need it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from tierlog.protocol.records import (
    NO_SEQUENCE,
    BatchHeader,
    Buffer,
    RecordsError,
    SimpleRecord,
    build_batch,
    iter_records,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class TxnSchemaError(ValueError):
    """A marker record that no schema version describes."""


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    type: ControlRecordType
    coordinator_epoch: int

    @property
    def committed(self) -> bool:
        return self.type is ControlRecordType.COMMIT


def encode_marker_key(kind: ControlRecordType) -> bytes:
    return _I16.pack(CONTROL_RECORD_KEY_VERSION) + _I16.pack(kind)


def encode_marker_value(coordinator_epoch: int) -> bytes:
    return _I16.pack(END_TXN_MARKER_VERSION) + _I32.pack(coordinator_epoch)


def control_record_type(key: bytes | None) -> int:
    """The control type of a control record's key; -1 (Kafka's UNKNOWN) if unreadable."""
    if key is None or len(key) < 4:
        return -1
    return int(_I16.unpack_from(key, 2)[0])


def decode_marker(key: bytes | None, value: bytes | None) -> EndTxnMarker:
    """The marker of a control record whose type is COMMIT or ABORT."""
    kind = control_record_type(key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise TxnSchemaError(f"control record type {kind} is not a transaction marker")
    if value is None or len(value) < 6:
        raise TxnSchemaError("EndTxnMarker value shorter than 6 bytes")
    if _I16.unpack_from(value, 0)[0] < 0:
        raise TxnSchemaError("negative EndTxnMarker version")
    return EndTxnMarker(ControlRecordType(kind), int(_I32.unpack_from(value, 2)[0]))


def marker_of_batch(buf: Buffer, header: BatchHeader) -> EndTxnMarker | None:
    """The transaction marker a control batch carries (``header`` locates it in ``buf``);
    None for a control batch of another type or one whose record cannot be read."""
    if not header.is_control:
        return None
    try:
        for record in iter_records(buf, header):
            return decode_marker(record.key, record.value)
    except (TxnSchemaError, RecordsError):
        return None
    return None


def build_marker_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    marker: EndTxnMarker,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch a partition leader appends for WriteTxnMarkers: one record, transactional
    and control attributes, base sequence -1."""
    record = SimpleRecord(
        encode_marker_value(marker.coordinator_epoch), key=encode_marker_key(marker.type)
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        transactional=True,
        control=True,
    )
