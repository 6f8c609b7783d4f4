"""Walking batch headers without validating the batches (protocol.records)."""

from __future__ import annotations

import struct

from tierlog.protocol.records import (
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    SimpleRecord,
    batch_size_at,
    build_batch,
    header_at,
    set_base_offset,
    walk_headers,
)


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
