"""tierlog.spark.decode against batches written by aiokafka and kafka-python."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.spark.spark_batches import Rec, build, control_batch, raw_snappy_batch, with_attributes
from tierlog.spark.decode import CorruptBatchError, decode_batches
from tierlog.spark.schema import arrow_schema

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_700_000_000_000


def sample(base: int, n: int) -> list[Rec]:
    out = []
    for i in range(n):
        o = base + i
        key = None if o % 5 == 0 else b"k%d" % o
        value = None if o % 7 == 3 else bytes([o % 256]) * (o % 50)
        headers: list[tuple[str, bytes | None]] = [(f"h{j}", b"v%d" % o) for j in range(o % 3)]
        if o % 11 == 1:
            headers.append(("nullv", None))
        out.append(Rec(o, T0 + o * 3, key, value, headers))
    return out


def rows(records: list[Rec], topic: str = "t", partition: int = 0) -> list[dict[str, object]]:
    """What Spark's Kafka source yields for these records (headers null when none)."""
    return [
        {
            "key": r.key,
            "value": r.value,
            "topic": topic,
            "partition": partition,
            "offset": r.offset,
            "timestamp": dt.datetime.fromtimestamp(r.timestamp / 1000, dt.UTC),
            "timestampType": 0,
            "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
        }
        for r in records
    ]


def decode(data: bytes, start: int = 0, end: int = 2**62, headers: bool = True) -> pa.RecordBatch:
    return decode_batches(
        data, topic="t", partition=0, start=start, end=end, include_headers=headers
    ).batch


# kafka-python needs the optional lz4 / python-snappy packages for those two codecs, which the
# venv does not carry; aiokafka (via cramjam) covers all five.
BUILDER_CODECS = [("aiokafka", c) for c in CODECS] + [
    ("kafka-python", c) for c in ("none", "gzip", "zstd")
]


@pytest.mark.parametrize(("builder", "codec"), BUILDER_CODECS)
def test_every_codec_decodes_exact_records(builder: str, codec: str) -> None:
    recs = sample(100, 60)
    data = build(recs[:25], CODECS[codec], builder) + build(recs[25:], CODECS[codec], builder)
    out = decode(data)
    assert out.schema == arrow_schema(True)
    assert out.to_pylist() == rows(recs)


def test_raw_snappy_blocks_as_librdkafka_writes_them() -> None:
    recs = sample(0, 40)
    assert decode(raw_snappy_batch(recs)).to_pylist() == rows(recs)


@pytest.mark.parametrize("codec", list(CODECS))
def test_bounds_are_exact_inside_batches(codec: str) -> None:
    recs = sample(10, 90)
    data = b"".join(build(recs[i : i + 30], CODECS[codec]) for i in range(0, 90, 30))
    for start, end in [(10, 100), (11, 99), (39, 41), (40, 70), (55, 56), (0, 10), (100, 200)]:
        out = decode(data, start, end)
        assert out.to_pylist() == rows([r for r in recs if start <= r.offset < end])


def test_without_headers_the_column_is_absent() -> None:
    recs = sample(0, 20)
    out = decode(build(recs, 0), headers=False)
    assert out.schema == arrow_schema(False)
    expected = [{k: v for k, v in row.items() if k != "headers"} for row in rows(recs)]
    assert out.to_pylist() == expected


def test_control_batches_are_skipped_and_aborted_data_kept() -> None:
    aborted = sample(0, 5)
    committed = sample(6, 5)
    data = (
        build(aborted, 4, transactional=True)
        + control_batch(5, T0, commit=False)
        + build(committed, 1, transactional=True)
        + control_batch(11, T0, commit=True)
    )
    result = decode_batches(data, topic="t", partition=0, start=0, end=100, include_headers=True)
    assert result.batch.to_pylist() == rows(aborted + committed)
    assert result.next_offset == 12
    assert result.consumed == len(data)


def test_log_append_time_uses_the_batch_max_timestamp() -> None:
    recs = sample(0, 4)
    data = with_attributes(build(recs, 3), 0x08, max_ts=T0 + 999_000)
    out = decode(data).to_pylist()
    assert [r["timestampType"] for r in out] == [1, 1, 1, 1]
    assert {r["timestamp"] for r in out} == {dt.datetime.fromtimestamp(T0 / 1000 + 999, dt.UTC)}


def test_partial_trailing_batch_is_left_for_the_next_read() -> None:
    first = build(sample(0, 10), 0)
    second = build(sample(10, 10), 2)
    result = decode_batches(
        first + second[:-5], topic="t", partition=0, start=0, end=100, include_headers=True
    )
    assert result.consumed == len(first)
    assert result.next_offset == 10
    assert result.batch.num_rows == 10


def test_batch_at_or_past_end_stops_the_scan() -> None:
    first = build(sample(0, 10), 0)
    data = first + build(sample(10, 10), 0)
    result = decode_batches(data, topic="t", partition=0, start=0, end=10, include_headers=False)
    assert result.batch.num_rows == 10
    assert result.consumed == len(first)
    assert result.next_offset == 10


def test_batches_before_start_are_skipped_without_rows() -> None:
    data = build(sample(0, 10), 0) + build(sample(10, 10), 0)
    result = decode_batches(data, topic="t", partition=0, start=10, end=20, include_headers=True)
    assert [r["offset"] for r in result.batch.to_pylist()] == list(range(10, 20))


def test_crc_mismatch_is_a_clear_error() -> None:
    data = bytearray(build(sample(0, 10), 0))
    data[80] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC"):
        decode(bytes(data))


def test_old_magic_is_rejected() -> None:
    data = bytearray(build(sample(0, 3), 0))
    data[16] = 1
    with pytest.raises(CorruptBatchError, match="magic"):
        decode(bytes(data))


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview at an offset"])
def test_plain_and_compressed_batches_decode_alike_from_any_buffer(kind: str) -> None:
    recs = sample(0, 90)
    data = build(recs[:30], CODECS["none"]) + build(recs[30:60], CODECS["lz4"])
    data += build(recs[60:], CODECS["none"])
    plain_only = build(recs[:30], CODECS["none"]) + build(recs[30:60], CODECS["none"])
    for payload, expected in ((data, recs), (plain_only, recs[:60])):
        buf: bytes | bytearray | memoryview = payload
        if kind == "bytearray":
            buf = bytearray(payload)
        elif kind == "memoryview at an offset":
            buf = memoryview(b"junk" + payload)[4:]
        result = decode_batches(buf, topic="t", partition=0, start=5, end=80, include_headers=True)
        assert result.batch.to_pylist() == rows([r for r in expected if 5 <= r.offset < 80])


def test_plain_record_reaching_into_the_next_batch_is_corrupt() -> None:
    first = bytearray(build([Rec(0, T0, None, b"abc")], CODECS["none"]))
    assert first[66] == 6  # the value length (zig-zag 3) of the only record
    first[66] = 0x7E  # 63 bytes: past this batch, into the next one's header
    data = bytes(first) + build([Rec(1, T0, None, b"x" * 100)], CODECS["none"])
    with pytest.raises(CorruptBatchError, match="record length"):
        decode_batches(
            data, topic="t", partition=0, start=0, end=2, include_headers=False, verify_crc=False
        )


def test_empty_input_gives_an_empty_batch() -> None:
    result = decode_batches(b"", topic="t", partition=0, start=0, end=10, include_headers=True)
    assert result.batch.num_rows == 0
    assert result.batch.schema == arrow_schema(True)
    assert (result.consumed, result.next_offset) == (0, -1)


record_st = st.builds(
    lambda ts, key, value, headers: (ts, key, value, headers),
    st.integers(0, 2**41),
    st.none() | st.binary(max_size=300),
    st.none() | st.binary(max_size=20_000),
    st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=30)), max_size=4),
)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(record_st, min_size=1, max_size=30), min_size=1, max_size=4),
    codec=st.sampled_from(list(CODECS.values())),
    bounds=st.tuples(st.integers(0, 130), st.integers(0, 130)),
)
def test_any_records_round_trip_within_bounds(
    batches: list[list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]],
    codec: int,
    bounds: tuple[int, int],
) -> None:
    all_recs: list[Rec] = []
    data = b""
    for batch in batches:
        base = len(all_recs)
        recs = [Rec(base + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(batch)]
        data += build(recs, codec)
        all_recs += recs
    start, end = min(bounds), max(bounds)
    out = decode(data, start, end)
    assert out.to_pylist() == rows([r for r in all_recs if start <= r.offset < end])
