"""The remote read path's cheap paths: a consumer reading sequentially continues one plugin
stream across Fetches (no new stream, index lookup or chunk re-read per Fetch), and a
response is one buffer of whole batches validated in place (no per-batch joins).
Validation stays: damage found after a stream was parked still fails the fetch that reaches
it, and only that one."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from rlm_helpers import Stack, make_stack

from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import RECORDS_OFFSET, iter_records, scan_batches
from tierlog.storage.directory import FETCH
from tierlog.tiered.manager import RemoteFetchRequest, RemoteFetchResult


@pytest.fixture
def st(tmp_path: Path) -> Iterator[Stack]:
    s = make_stack(tmp_path)
    s.produce(35, per_segment=10)
    s.rlm.run_now(s.log.tp, "copy")
    s.log.update_config(dataclasses.replace(s.log.config, local_retention_bytes=1))
    s.log.run_retention()
    assert s.log.local_log_start_offset == 30
    yield s
    s.close()


def _read(st: Stack, offset: int, max_bytes: int) -> RemoteFetchResult:
    (res,) = asyncio.run(
        st.rlm.read_remote([RemoteFetchRequest(st.log, offset, max_bytes)], 50 << 20)
    )
    return res


def _offsets(data: bytes | memoryview) -> list[int]:
    view = memoryview(data)
    return [r.offset for h in scan_batches(view) for r in iter_records(view, h)]


def _batch_size(st: Stack) -> int:
    whole = _read(st, 0, 1 << 20)
    sizes = {h.size for h in scan_batches(memoryview(whole.records))}
    assert len(sizes) == 1  # the fixture's batches all have the same size
    st.rlm.reader.parked.clear()
    return int(sizes.pop())


def test_sequential_fetches_continue_one_stream(st: Stack) -> None:
    size = _batch_size(st)
    streams_before = len(st.rsm.events(FETCH))
    got: list[int] = []
    for offset in (0, 3, 6, 9):
        res = _read(st, offset, 3 * size)
        assert res.error is ErrorCode.NONE
        got += _offsets(res.records)
    assert got == list(range(10))
    assert len(st.rsm.events(FETCH)) - streams_before == 1  # was one stream per Fetch


def test_a_read_at_another_offset_opens_its_own_stream_and_leaves_the_parked_one(
    st: Stack,
) -> None:
    size = _batch_size(st)
    streams_before = len(st.rsm.events(FETCH))
    assert _offsets(_read(st, 0, 3 * size).records) == [0, 1, 2]
    assert _offsets(_read(st, 7, 3 * size).records) == [7, 8, 9]
    assert len(st.rsm.events(FETCH)) - streams_before == 2
    assert _offsets(_read(st, 3, 2 * size).records) == [3, 4]  # the stream parked at 3
    assert len(st.rsm.events(FETCH)) - streams_before == 2


def test_the_next_segment_is_read_from_a_fresh_stream(st: Stack) -> None:
    size = _batch_size(st)
    assert _offsets(_read(st, 8, 5 * size).records) == [8, 9]  # one segment per response
    # values "v10".. make these batches a byte longer than the first segment's
    assert _offsets(_read(st, 10, 2 * (size + 1)).records) == [10, 11]


def test_records_are_one_buffer_of_whole_batches_not_a_join(st: Stack) -> None:
    size = _batch_size(st)
    res = _read(st, 0, 4 * size + size // 2)
    assert isinstance(res.records, memoryview)  # a view of the buffer the stream filled
    assert len(res.records) == 4 * size and _offsets(res.records) == [0, 1, 2, 3]


def test_damage_behind_a_parked_stream_fails_the_fetch_that_reaches_it(st: Stack) -> None:
    size = _batch_size(st)
    (log_file,) = [p for p in (st.root / "remote").rglob("00000000000000000000-*.log")]
    raw = bytearray(log_file.read_bytes())
    raw[4 * size + RECORDS_OFFSET + 2] ^= 0xFF  # a record byte of the batch at offset 4
    log_file.write_bytes(bytes(raw))
    first = _read(st, 0, 10 * size)
    assert first.error is ErrorCode.NONE and _offsets(first.records) == [0, 1, 2, 3]
    streams = len(st.rsm.events(FETCH))
    second = _read(st, 4, 10 * size)
    assert second.error is ErrorCode.CORRUPT_MESSAGE
    assert len(st.rsm.events(FETCH)) == streams  # found in the parked stream's carry
    again = _read(st, 4, 10 * size)  # and from a fresh stream too
    assert again.error is ErrorCode.CORRUPT_MESSAGE
    assert _offsets(_read(st, 5, 10 * size).records) == [5, 6, 7, 8, 9]


def test_closing_the_manager_closes_its_parked_streams(tmp_path: Path) -> None:
    s = make_stack(tmp_path)
    s.produce(25, per_segment=10)
    s.rlm.run_now(s.log.tp, "copy")
    s.log.update_config(dataclasses.replace(s.log.config, local_retention_bytes=1))
    s.log.run_retention()
    whole = _read(s, 0, 1 << 20)
    size = scan_batches(memoryview(whole.records))[0].size
    _read(s, 0, 2 * size)
    parked = s.rlm.reader.parked.cursors()
    assert len(parked) == 1
    s.close()
    assert parked[0].stream.closed
    assert not s.rlm.reader.parked.cursors()


def test_two_managers_in_one_process_keep_their_parked_streams_apart(tmp_path: Path) -> None:
    stacks = []
    for name in ("a", "b"):  # the same partition, tiered by two managers
        s = make_stack(tmp_path / name)
        s.produce(25, per_segment=10)
        s.rlm.run_now(s.log.tp, "copy")
        s.log.update_config(dataclasses.replace(s.log.config, local_retention_bytes=1))
        s.log.run_retention()
        stacks.append(s)
    a, b = stacks
    try:
        size = _batch_size(a)
        assert _offsets(_read(a, 0, 2 * size).records) == [0, 1]
        assert _offsets(_read(b, 0, 2 * size).records) == [0, 1]
        assert len(a.rlm.reader.parked.cursors()) == len(b.rlm.reader.parked.cursors()) == 1
        streams = len(a.rsm.events(FETCH))
        assert _offsets(_read(a, 2, 2 * size).records) == [2, 3]
        assert len(a.rsm.events(FETCH)) == streams  # a's own parked stream, not b's
        b.rlm.close()
        assert len(a.rlm.reader.parked.cursors()) == 1  # closing b left a's alone
    finally:
        a.close()
        b.close()
