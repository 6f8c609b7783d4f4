"""A remote read its Fetch stopped waiting for (``remote.fetch.max.wait.ms``) keeps running,
and the next Fetch at that offset gets what it read: by waiting for it, or from the cursor
it parked, the records given back. Either way the segment is streamed once."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.tiered.manager.rlm_helpers import DEADLINE_S, Stack, make_stack, offload, wait_until
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.tiered.api import RemoteLogSegmentMetadata, TopicIdPartition
from tierlog.tiered.manager import RemoteFetchRequest, RemoteFetchResult
from tierlog.tiered.manager.abandoned_reads import AbandonedReads

#: Long enough that an adopted read, released as soon as it is adopted, lands within it.
MAX_WAIT_MS = 500


class Gated:
    """The plugin's ``fetch_log_segment``, held at a gate and counted."""

    def __init__(self, st: Stack) -> None:
        self.real = st.rsm.fetch_log_segment
        self.gate = threading.Event()
        self.streams = 0
        st.rsm.fetch_log_segment = self  # type: ignore[method-assign]

    def __call__(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        self.streams += 1
        self.gate.wait(DEADLINE_S)
        return self.real(metadata, start_position, end_position)


@pytest.fixture
def st(tmp_path: Path) -> Iterator[Stack]:
    s = make_stack(tmp_path, rlm_overrides={"remote_fetch_max_wait_ms": MAX_WAIT_MS})
    offload(s)
    yield s
    s.close()


def offsets(res: RemoteFetchResult) -> list[int]:
    data = res.records
    return [r.offset for h in scan_batches(memoryview(data)) for r in iter_records(data, h)]


def read(st: Stack, req: RemoteFetchRequest) -> RemoteFetchResult:
    (res,) = asyncio.run(st.rlm.read_remote([req], 50 << 20))
    return res


def given_up(st: Stack, req: RemoteFetchRequest) -> None:
    res = read(st, req)
    assert (res.error, res.records) == (ErrorCode.NONE, b"")  # nothing yet, no error
    assert st.rlm.abandoned_reads == 1


def taken_over(st: Stack, gated: Gated, req: RemoteFetchRequest) -> RemoteFetchResult:
    """``req`` read (on a thread of its own) while the read given up on still runs: once
    ``req``'s Fetch has taken it over, the gate opens."""
    got: list[RemoteFetchResult] = []
    fetch = threading.Thread(target=lambda: got.append(read(st, req)))
    fetch.start()
    try:
        wait_until(lambda: st.rlm.abandoned_reads == 0, "the read to be taken over")
    finally:
        gated.gate.set()
        fetch.join(DEADLINE_S)
    (res,) = got
    assert res.request is req  # it answers the Fetch that waited for it
    return res


def test_the_next_fetch_at_the_offset_waits_for_the_read_given_up_on(st: Stack) -> None:
    gated = Gated(st)
    given_up(st, RemoteFetchRequest(st.log, 0, 1 << 20))
    res = taken_over(st, gated, RemoteFetchRequest(st.log, 0, 1 << 20))
    assert offsets(res) == list(range(10))
    assert gated.streams == 1
    assert st.metric("tierlog_remote_fetch_expires_total") == 1
    assert st.metric("tierlog_remote_fetch_taken_over_total") == 1


def test_a_fetch_with_a_smaller_budget_takes_over_the_read_and_gets_what_fits(
    st: Stack,
) -> None:
    gated = Gated(st)
    with gated.real(st.remote()[1], 0) as f:  # offsets 10..19, not through the gate
        batch = scan_batches(memoryview(f.read()))[0].size
    given_up(st, RemoteFetchRequest(st.log, 10, 3 * batch))  # would answer 10, 11, 12
    res = taken_over(st, gated, RemoteFetchRequest(st.log, 10, batch, min_one_message=False))
    assert offsets(res) == [10]
    assert offsets(read(st, RemoteFetchRequest(st.log, 11, 3 * batch))) == [11, 12]
    assert gated.streams == 1  # the rest was given back to the cursor


def test_a_read_done_before_the_next_fetch_gives_its_records_back_to_its_cursor(
    st: Stack,
) -> None:
    gated = Gated(st)
    # one batch per read, so the read parks its cursor mid-segment instead of closing it
    given_up(st, RemoteFetchRequest(st.log, 10, 1))
    gated.gate.set()
    wait_until(lambda: st.rlm.abandoned_reads == 0, "the read given up on to end")
    assert offsets(read(st, RemoteFetchRequest(st.log, 10, 1))) == [10]
    assert gated.streams == 1  # served from the cursor that read parked
    assert offsets(read(st, RemoteFetchRequest(st.log, 11, 1))) == [11]
    assert gated.streams == 1  # and the cursor goes on from there


def test_a_fetch_with_other_limits_does_not_take_over_the_read(st: Stack) -> None:
    gated = Gated(st)
    given_up(st, RemoteFetchRequest(st.log, 0, 1 << 20))
    gated.gate.set()
    res = read(st, RemoteFetchRequest(st.log, 0, 1 << 20, read_committed=True))
    assert offsets(res) == list(range(10))  # read on its own
    wait_until(lambda: st.rlm.abandoned_reads == 0, "the read given up on to end")


def test_once_some_reads_have_records_the_fetch_leaves_a_slow_one_to_the_next(
    tmp_path: Path,
) -> None:
    """``remote.fetch.partial.wait.ms``: a Fetch of two remote reads, one of them held at
    the store, answers with the other's records instead of waiting out
    ``remote.fetch.max.wait.ms`` (a minute here); the held read goes on, and the next Fetch
    at its offset gets what it read, from the one stream it opened."""
    s = make_stack(
        tmp_path,
        rlm_overrides={"remote_fetch_max_wait_ms": 60_000, "remote_fetch_partial_wait_ms": 0},
    )
    try:
        offload(s)
        slow = s.remote()[1]  # offsets 10..19
        gate = threading.Event()
        opened: list[int] = []
        real = s.rsm.fetch_log_segment
        with real(slow, 0) as f:
            batch = scan_batches(memoryview(f.read()))[0].size

        def fetch(
            metadata: RemoteLogSegmentMetadata, start: int, end: int | None = None
        ) -> BinaryIO:
            opened.append(metadata.start_offset)
            if metadata.remote_log_segment_id == slow.remote_log_segment_id:
                gate.wait(DEADLINE_S)
            return real(metadata, start, end)

        s.rsm.fetch_log_segment = fetch  # type: ignore[method-assign,assignment]
        fast, held = asyncio.run(
            s.rlm.read_remote(
                # one batch for the slow read, which then parks its cursor mid-segment
                [RemoteFetchRequest(s.log, 0, 1 << 20), RemoteFetchRequest(s.log, 10, batch)],
                50 << 20,
            )
        )
        assert offsets(fast) == list(range(10))
        assert (held.error, held.records) == (ErrorCode.NONE, b"")  # nothing yet, no error
        assert s.rlm.abandoned_reads == 1
        assert s.metric("tierlog_remote_fetch_expires_total") == 1
        gate.set()
        assert offsets(read(s, RemoteFetchRequest(s.log, 10, batch))) == [10]
        assert offsets(read(s, RemoteFetchRequest(s.log, 11, batch))) == [11]
        assert opened.count(10) == 1
    finally:
        s.close()


# --- AbandonedReads on its own ------------------------------------------------------------

TIP = TopicIdPartition(uuid.UUID(int=9), "t", 0)


def kept() -> tuple[AbandonedReads[str, int], list[tuple[str, int]]]:
    given: list[tuple[str, int]] = []
    return AbandonedReads(lambda asked, result: given.append((asked, result))), given


def test_a_kept_read_that_ends_untaken_goes_to_unclaimed() -> None:
    reads, given = kept()
    read: Future[int] = Future()
    read.set_running_or_notify_cancel()
    reads.keep(TIP, 5, False, "asked", read)
    read.set_result(7)
    assert given == [("asked", 7)] and len(reads) == 0


def test_an_adopted_read_is_the_adopters_alone() -> None:
    reads, given = kept()
    read: Future[int] = Future()
    reads.keep(TIP, 5, False, "asked", read)
    assert reads.adopt(TIP, 5, True) is None  # other limits
    assert reads.adopt(TIP, 6, False) is None  # other offset
    assert reads.adopt(TIP, 5, False) == ("asked", read)
    assert reads.adopt(TIP, 5, False) is None  # taken
    read.set_result(7)
    assert given == []


def test_a_newer_read_at_the_offset_replaces_the_older() -> None:
    reads, given = kept()
    older: Future[int] = Future()
    newer: Future[int] = Future()
    reads.keep(TIP, 5, False, "older", older)
    reads.keep(TIP, 5, False, "newer", newer)
    older.set_result(1)
    newer.set_result(2)
    assert given == [("newer", 2)]


def test_a_failed_read_gives_nothing_back() -> None:
    reads, given = kept()
    read: Future[int] = Future()
    reads.keep(TIP, 5, False, "asked", read)
    read.set_exception(OSError("store gone"))
    assert given == [] and len(reads) == 0
