"""Human-readable dumps of log files, in the style of Kafka's ``kafka-dump-log.sh``.

The CLI (``tierlog dump-log``) prints these lines; the decoder is picked by file suffix so the
same command works on every file in a partition directory.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from tierlog.log.checkpoint import read_epoch_checkpoint, read_partition_metadata
from tierlog.log.names import (
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_from_file_name,
)
from tierlog.log.producer_state import decode_snapshot
from tierlog.log.txn_index import read_aborted_txns
from tierlog.protocol.records import (
    BatchHeader,
    RecordsError,
    TimestampType,
    iter_records,
    scan_valid_prefix,
)
from tierlog.protocol.txn_markers import TxnSchemaError, control_record_type, decode_marker

_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_OFFSET_ENTRY = struct.Struct(">II")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qI")  # timestamp, relative offset


def dump_file(path: Path, *, deep: bool = True) -> Iterator[str]:
    """Describe ``path`` line by line; ``deep`` also prints each record of a ``.log``."""
    path = Path(path)
    yield f"Dumping {path}"
    name = path.name
    if name.endswith(LOG_SUFFIX):
        yield from _dump_log(path, deep)
    elif name.endswith(INDEX_SUFFIX):
        base = offset_from_file_name(path)
        for rel, pos in _index_entries(path, _OFFSET_ENTRY):
            yield f"offset: {base + rel} position: {pos}"
    elif name.endswith(TIME_INDEX_SUFFIX):
        base = offset_from_file_name(path)
        for ts, rel in _index_entries(path, _TIME_ENTRY):
            yield f"timestamp: {ts} offset: {base + rel}"
    elif name.endswith(SNAPSHOT_SUFFIX):
        yield from _dump_snapshot(path)
    elif name.endswith(TXN_INDEX_SUFFIX):
        for t in read_aborted_txns(path):
            yield (
                f"version: 0 producerId: {t.producer_id} firstOffset: {t.first_offset} "
                f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}"
            )
    elif name == LEADER_EPOCH_CHECKPOINT:
        for epoch, offset in read_epoch_checkpoint(path):
            yield f"epoch: {epoch} startOffset: {offset}"
    elif name == PARTITION_METADATA:
        yield f"topicId: {read_partition_metadata(path)}"
    else:
        raise ValueError(f"don't know how to dump {path.name}")


def _index_entries(path: Path, layout: struct.Struct) -> Iterator[tuple[int, int]]:
    """The entries of an offset or time index, parsed from the raw bytes: opening the index
    would resize a live preallocated file. An all-zero entry after the first is the
    preallocated tail of an active index, where the entries end."""
    raw = path.read_bytes()
    for n in range(len(raw) // layout.size):
        entry = layout.unpack_from(raw, n * layout.size)
        if n > 0 and entry == (0, 0):
            break
        yield entry


def _dump_snapshot(path: Path) -> Iterator[str]:
    for pe in decode_snapshot(path.read_bytes()):
        last = pe.batches[-1] if pe.batches else None
        yield (
            f"producerId: {pe.producer_id} producerEpoch: {pe.producer_epoch} "
            f"coordinatorEpoch: {pe.coordinator_epoch} "
            f"currentTxnFirstOffset: {pe.current_txn_first_offset} "
            f"lastTimestamp: {pe.last_timestamp} "
            f"firstSequence: {last.first_seq if last else -1} "
            f"lastSequence: {last.last_seq if last else -1} "
            f"lastOffset: {last.last_offset if last else -1} "
            f"offsetDelta: {last.offset_delta if last else 0} "
            f"timestamp: {last.timestamp if last else -1}"
        )


def _describe(h: BatchHeader) -> str:
    ts_type = "LogAppendTime" if h.timestamp_type is TimestampType.LOG_APPEND_TIME else "CreateTime"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} "
        f"isControl: {str(h.is_control).lower()} position: {h.position} "
        f"{ts_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: {_CODEC_NAMES.get(int(h.compression), '?')} crc: {h.crc} isvalid: true"
    )


def _marker(h: BatchHeader, key: bytes | None, value: bytes | None) -> str:
    """Kafka's DumpLogSegments suffix of a transaction marker record."""
    if not h.is_control:
        return ""
    try:
        marker = decode_marker(key, value)
    except TxnSchemaError:
        return f" controlType: {control_record_type(key)}"
    return f" endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"


def _gap(expected: int | None, offset: int) -> Iterator[str]:
    """The offsets a compacted log no longer holds between two records or batches."""
    if expected is not None and offset > expected:
        last = offset - 1
        span = f"{expected}" if last == expected else f"{expected}..{last}"
        yield f"| gap: offset{'s' if last > expected else ''} {span} compacted away"


def _dump_log(path: Path, deep: bool) -> Iterator[str]:
    data = path.read_bytes()
    scan = scan_valid_prefix(data)
    expected: int | None = offset_from_file_name(path) if path.name[:1].isdigit() else None
    for h in scan.headers:
        if not deep:
            yield from _gap(expected, h.base_offset)
        yield _describe(h)
        if not deep:
            expected = h.next_offset
            continue
        try:
            for r in iter_records(data, h):
                yield from _gap(expected, r.offset)
                expected = r.offset + 1
                keys = ",".join(k for k, _ in r.headers)
                seq = h.base_sequence + (r.offset - h.base_offset) if h.base_sequence >= 0 else -1
                yield (
                    f"| offset: {r.offset} {'LogAppendTime' if h.attributes & 8 else 'CreateTime'}"
                    f": {r.timestamp} keySize: {-1 if r.key is None else len(r.key)} "
                    f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} "
                    f"headerKeys: [{keys}]{_marker(h, r.key, r.value)}"
                )
        except (RecordsError, ValueError, struct.error) as exc:
            yield f"| records could not be decoded: {exc}"
        if expected is None or expected < h.base_offset:
            expected = h.base_offset
        if h.records_count == 0:
            expected = max(expected, h.next_offset)  # an empty batch kept for its producer
    if scan.error is not None:
        yield f"Found invalid bytes at position {scan.valid_end}: {scan.error.message}"
