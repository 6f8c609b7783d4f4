"""Record batches (protocol.records): the codec against batches built by two independent
client implementations, and walking batch headers without validating the batches."""

from __future__ import annotations

import struct

import crc32c
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import (
    CRC_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    Compression,
    RecordsError,
    SimpleRecord,
    TimestampType,
    batch_size_at,
    build_batch,
    check_batch,
    header_at,
    iter_records,
    read_header,
    scan_batches,
    scan_valid_prefix,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    valid_batches_prefix,
    validate_client_batch,
    walk_headers,
    whole_batches_length,
)

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


def aiokafka_batch(codec: int, n: int = 20, pid: int = 7, seq: int = 3) -> bytes:
    b = AioBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=pid,
        producer_epoch=2,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=1_000 + i, key=b"key-%d" % i, value=b"v" * (i * 10), headers=[])
    return bytes(b.build())


def kafka_python_batch(codec: int, n: int = 20) -> bytes:
    b = KpBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=5_000 + i, key=None, value=b"x" * (i + 1), headers=[("h", b"1")])
    return bytes(b.build())


@pytest.mark.parametrize("codec", CODECS)
def test_scan_accepts_aiokafka_batches_for_every_codec(codec: Compression) -> None:
    data = aiokafka_batch(int(codec))
    (h,) = scan_batches(data)
    assert h.compression is codec
    assert h.records_count == 20 and h.last_offset_delta == 19
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 3, 22)
    assert (h.base_timestamp, h.max_timestamp) == (1_000, 1_019)
    assert h.size == len(data)
    values = [r.value for r in iter_records(data)]
    assert values == [b"v" * (i * 10) for i in range(20)]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_scan_accepts_kafka_python_batches(codec: Compression) -> None:
    data = kafka_python_batch(int(codec))
    (h,) = scan_batches(data)
    recs = list(iter_records(data))
    assert [r.value for r in recs] == [b"x" * (i + 1) for i in range(20)]
    assert recs[3].headers == (("h", b"1"),) and recs[3].timestamp == 5_003
    assert h.records_count == 20


@pytest.mark.parametrize("codec", CODECS)
def test_our_builder_output_is_read_by_aiokafka(codec: Compression) -> None:
    recs = [SimpleRecord(b"val%d" % i, b"k", 100 + i, (("a", b"b"),)) for i in range(5)]
    data = build_batch(recs, base_offset=40, compression=codec)
    parsed = AioBatch(data)
    assert parsed.validate_crc()
    got = [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in parsed]
    assert got == [(40 + i, b"k", b"val%d" % i, 100 + i, [("a", b"b")]) for i in range(5)]


def test_offset_and_epoch_patch_keeps_crc_valid() -> None:
    data = bytearray(aiokafka_batch(int(Compression.LZ4)))
    set_base_offset(data, 0, 123_456)
    set_partition_leader_epoch(data, 0, 9)
    (h,) = scan_batches(data)  # verifies the CRC
    assert (h.base_offset, h.partition_leader_epoch) == (123_456, 9)
    assert [r.offset for r in iter_records(data)] == list(range(123_456, 123_476))
    assert AioBatch(bytes(data)).validate_crc()


def test_log_append_time_patch_rewrites_max_timestamp_and_crc() -> None:
    data = bytearray(aiokafka_batch(int(Compression.NONE)))
    (h,) = scan_batches(data)
    set_log_append_time(data, h, 9_999_999)
    (h2,) = scan_batches(data)
    assert h2.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert h2.max_timestamp == 9_999_999
    assert {r.timestamp for r in iter_records(data)} == {9_999_999}
    assert AioBatch(bytes(data)).validate_crc()


def test_corrupt_crc_is_corrupt_message() -> None:
    data = bytearray(aiokafka_batch(0))
    data[-1] ^= 0xFF
    with pytest.raises(RecordsError) as info:
        scan_batches(data)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE


def test_old_magic_is_unsupported_for_message_format() -> None:
    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1000)
    b.append(0, timestamp=1, key=b"k", value=b"v")
    with pytest.raises(RecordsError) as info:
        scan_batches(bytes(b.build()))
    assert info.value.code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


def test_truncated_batch_is_corrupt_and_prefix_scan_stops_before_it() -> None:
    one = aiokafka_batch(0, n=3)
    two = build_batch([b"a", b"b"], base_offset=3)
    data = one + two[:-5]
    with pytest.raises(RecordsError) as info:
        scan_batches(data)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE and info.value.position == len(one)
    prefix = scan_valid_prefix(data)
    assert prefix.valid_end == len(one) and len(prefix.headers) == 1
    assert prefix.error is not None
    assert whole_batches_length(data) == len(one)


def test_length_below_minimum_is_corrupt() -> None:
    data = bytearray(build_batch([b"a"]))
    struct.pack_into(">i", data, 8, 5)
    with pytest.raises(RecordsError) as info:
        scan_batches(data)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE


def test_inconsistent_last_offset_delta_is_invalid_record() -> None:
    data = bytearray(build_batch([b"a", b"b", b"c"]))
    struct.pack_into(">i", data, 23, 5)  # lastOffsetDelta 5 for 3 records
    struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[21:])))
    (h,) = scan_batches(data)
    with pytest.raises(RecordsError) as info:
        validate_client_batch(h)
    assert info.value.code is ErrorCode.INVALID_RECORD


def test_read_header_matches_layout_offsets() -> None:
    data = build_batch([b"x"], base_offset=0x0102030405060708, producer_id=77, base_sequence=5)
    h = read_header(data)
    assert data[0:8] == bytes.fromhex("0102030405060708")
    assert data[16] == 2  # magic
    assert struct.unpack_from(">q", data, 43)[0] == 77 == h.producer_id
    assert struct.unpack_from(">i", data, 57)[0] == 1 == h.records_count


# ---- walking batch headers without validating the batches -----------------------------
def _log(n: int) -> bytes:
    out = bytearray()
    for i in range(n):
        batch = bytearray(build_batch([SimpleRecord(f"v{i}".encode()), SimpleRecord(b"x")]))
        set_base_offset(batch, 0, 2 * i)
        out += batch
    return bytes(out)


def test_walk_headers_reads_each_batch_header_once_and_stops_at_padding() -> None:
    data = _log(3) + bytes(100)  # the zeros of a preallocated file
    reads: list[tuple[int, int]] = []

    def read_at(pos: int, n: int) -> bytes:
        reads.append((pos, n))
        return data[pos : pos + n]

    headers = list(walk_headers(read_at, 0, len(data)))
    assert [h.base_offset for h in headers] == [0, 2, 4]
    assert [h.last_offset for h in headers] == [1, 3, 5]
    assert [h.position for h in headers] == [0, headers[0].end, headers[1].end]
    assert all(n == RECORDS_OFFSET for _, n in reads)
    assert len(reads) == 4  # three headers and the padding


def test_walk_headers_stops_before_a_batch_past_the_end() -> None:
    data = _log(2)
    end = len(data) - 1
    assert [h.base_offset for h in walk_headers(lambda p, n: data[p : p + n], 0, end)] == [0]


def test_header_at_is_none_where_the_batches_end() -> None:
    data = _log(1)
    assert header_at(data) is not None
    assert batch_size_at(data) == len(data)
    assert header_at(data[: RECORDS_OFFSET - 1]) is None
    assert header_at(struct.pack(">qi", 0, 10) + bytes(RECORDS_OFFSET)) is None
    assert header_at(bytes(RECORDS_OFFSET)) is None
    assert header_at(data + data, len(data)) is not None
    assert batch_size_at(bytes(LOG_OVERHEAD)) == LOG_OVERHEAD


def _reference_prefix(buf: bytes, first_min: int, last_max: int) -> tuple[int, int]:
    """What ``valid_batches_prefix`` must return: ``check_batch`` on each batch in turn."""
    pos, last, expected = 0, -1, None
    while True:
        try:
            h = check_batch(buf, pos, len(buf))
        except RecordsError:
            return pos, last
        if (expected is not None and h.base_offset != expected) or not (
            first_min <= h.base_offset <= h.last_offset <= last_max
        ):
            return pos, last
        pos, last, expected = h.end, h.last_offset, h.last_offset + 1


def test_valid_batches_prefix_agrees_with_check_batch_on_damaged_logs() -> None:
    """The inline checks of the served-read fast path accept exactly what ``check_batch``
    accepts: every byte of a small log flipped in turn, a gap in the offsets, offsets
    outside the allowed range, and a torn tail."""
    log = _log(6)  # offsets 0..11, two records per batch
    cases = [(log, 0, 11), (log, 2, 11), (log, 0, 9), (log[:-5], 0, 11), (b"", 0, 11)]
    for i in range(len(log)):
        damaged = bytearray(log)
        damaged[i] ^= 0x5A
        cases.append((bytes(damaged), 0, 11))
    gap = bytearray(log)
    second = batch_size_at(gap)
    set_base_offset(gap, second, 3)  # offset 2 expected
    cases.append((bytes(gap), 0, 11))
    for buf, first_min, last_max in cases:
        assert valid_batches_prefix(buf, first_min, last_max) == _reference_prefix(
            buf, first_min, last_max
        )
    assert valid_batches_prefix(log, 0, 11) == (len(log), 11)
