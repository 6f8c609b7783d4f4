"""Spec §5.4 and the remote read path: exact batches back from the remote tier."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.tiered.manager.rlm_helpers import DEADLINE_S, Stack, make_stack, offload, wait_until
from tierlog.log import PartitionLog, TopicPartition
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.storage.directory import FETCH
from tierlog.tiered.api import RemoteLogSegmentMetadata, TopicIdPartition
from tierlog.tiered.manager import (
    RemoteFetchRequest,
    RemoteFetchResult,
    earliest_local_offset,
    latest_tiered_offset,
)
from tierlog.tiered.manager.scheduling import BoundedExecutor, RejectedExecution


@pytest.fixture
def st(tmp_path: Path) -> Iterator[Stack]:
    s = make_stack(tmp_path)
    offload(s)
    assert s.log.local_log_start_offset == 30
    yield s
    s.close()


def read(
    st: Stack, *reqs: RemoteFetchRequest, fetch_max_bytes: int = 50 << 20
) -> list[RemoteFetchResult]:
    return asyncio.run(st.rlm.read_remote(list(reqs), fetch_max_bytes))


def offsets(data: bytes | memoryview) -> list[int]:
    return [r.offset for h in scan_batches(memoryview(data)) for r in iter_records(data, h)]


def test_read_from_zero_returns_first_remote_segment_exactly(st: Stack) -> None:
    (res,) = read(st, RemoteFetchRequest(st.log, 0, 1 << 20))
    assert res.error is ErrorCode.NONE
    md = st.remote()[0]
    with st.rsm.fetch_log_segment(md, 0) as f:
        assert res.records == f.read()  # one response never spans two segments
    recs = [r for h in scan_batches(memoryview(res.records)) for r in iter_records(res.records, h)]
    assert [(r.offset, r.value) for r in recs] == [(i, f"v{i}".encode()) for i in range(10)]
    assert st.metric("tierlog_remote_fetch_requests_total") == 1
    assert st.metric("tierlog_remote_fetch_bytes_total") == len(res.records)


def test_read_mid_segment_skips_batches_below_offset(st: Stack) -> None:
    (res,) = read(st, RemoteFetchRequest(st.log, 15, 1 << 20))
    assert offsets(res.records) == list(range(15, 20))
    (res,) = read(st, RemoteFetchRequest(st.log, 29, 1 << 20))
    assert offsets(res.records) == [29]


def test_max_bytes_and_min_one_message(st: Stack) -> None:
    (whole,) = read(st, RemoteFetchRequest(st.log, 0, 1 << 20))
    one_batch = scan_batches(memoryview(whole.records))[0].size
    (res,) = read(st, RemoteFetchRequest(st.log, 0, 1, min_one_message=True))
    assert offsets(res.records) == [0] and len(res.records) == one_batch
    (res,) = read(st, RemoteFetchRequest(st.log, 0, 1, min_one_message=False))
    assert (res.error, res.records) == (ErrorCode.NONE, b"")
    (res,) = read(st, RemoteFetchRequest(st.log, 0, 3 * one_batch + 1))
    assert offsets(res.records) == [0, 1, 2]  # whole batches only


def test_missing_offset_is_out_of_range_without_error_metric(st: Stack) -> None:
    st.log.update_config(dataclasses.replace(st.log.config, retention_ms=1))
    st.rlm.run_now(st.tp, "expiration")
    assert st.remote() == []
    (res,) = read(st, RemoteFetchRequest(st.log, 0, 1 << 20))
    assert res.error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert "does not exist in remote tier" in res.error_message
    assert st.metric("tierlog_remote_fetch_errors_total") == 0


def test_index_cache_serves_repeat_reads(st: Stack) -> None:
    read(st, RemoteFetchRequest(st.log, 0, 1 << 20))
    read(st, RemoteFetchRequest(st.log, 3, 1 << 20))
    assert st.metrics.value("tierlog_remote_index_cache_misses_total") == 1
    assert st.metrics.value("tierlog_remote_index_cache_hits_total") >= 1
    assert len(st.rsm.events(FETCH)) == 2
    cache_dir = st.root / "logs" / "remote-log-index-cache"
    assert len(list(cache_dir.glob("0_*.index"))) == 1


def test_fetch_over_quota_is_shed_without_error(tmp_path: Path) -> None:
    st = make_stack(tmp_path, rlm_overrides={"fetch_max_bytes_per_second": 1.0})
    try:
        offload(st)
        (first,) = read(st, RemoteFetchRequest(st.log, 0, 1 << 20))
        assert first.records
        (shed,) = read(st, RemoteFetchRequest(st.log, 0, 1 << 20))
        assert (shed.error, shed.records, shed.throttled) == (ErrorCode.NONE, b"", True)
        assert st.metrics.value("tierlog_remote_fetch_throttle_time_ms_count") == 1
        assert len(st.rsm.events(FETCH)) == 1  # the shed read never reached the RSM
    finally:
        st.close()


def test_eight_remote_partitions_in_one_fetch_all_return_data(tmp_path: Path) -> None:
    """With the partial wait as long as the whole wait, one Fetch waits for all eight reads
    (the default 20 ms would leave a read that a slow machine has not finished to the next
    Fetch, which test_abandoned_reads covers)."""
    st = make_stack(
        tmp_path,
        rlm_overrides={"remote_fetch_max_wait_ms": 60_000, "remote_fetch_partial_wait_ms": 60_000},
    )
    logs = [st.log]
    try:
        st.produce(25, per_segment=10)
        for p in range(1, 8):
            lg = PartitionLog(
                TopicPartition(st.tp.topic, p),
                tmp_path / "logs" / f"{st.tp.topic}-{p}",
                st.log.config,
                topic_id=st.log.topic_id,
                remote_enabled=True,
            )
            logs.append(lg)
            st.rlm.on_leadership_change([lg])
            for _ in range(25):
                other = Stack(st.root, lg, st.rsm, st.rlmm, st.rlm, st.metrics)
                other.produce(1)
                if lg.log_end_offset % 10 == 0:
                    lg.roll()
        for lg in logs:
            wait_until(functools.partial(st.rlmm.is_ready, _tip(lg)), "metadata ready")
            offload(st, lg)
            assert lg.local_log_start_offset == 20
        results = read(st, *(RemoteFetchRequest(lg, 0, 1 << 20) for lg in logs))
        assert [offsets(r.records) for r in results] == [list(range(10))] * 8
    finally:
        for lg in logs[1:]:
            lg.close()


def _tip(lg: PartitionLog) -> TopicIdPartition:
    assert lg.topic_id is not None
    return TopicIdPartition(lg.topic_id, lg.tp.topic, lg.tp.partition)


def test_total_bytes_stay_within_fetch_max_bytes(st: Stack) -> None:
    (whole,) = read(st, RemoteFetchRequest(st.log, 10, 1 << 20))
    batch = scan_batches(memoryview(whole.records))[0].size  # offsets 10-29 have equal sizes
    a, b, c, d = read(
        st,
        RemoteFetchRequest(st.log, 0, 6 * batch),
        RemoteFetchRequest(st.log, 10, 6 * batch),
        RemoteFetchRequest(st.log, 20, 6 * batch),
        RemoteFetchRequest(st.log, 25, 6 * batch),
        fetch_max_bytes=14 * batch,
    )
    # budgets are reserved up front because the reads run concurrently: 6 + 6 + 2 + 0
    assert offsets(a.records) == list(range(6))
    assert offsets(b.records) == list(range(10, 16))
    assert offsets(c.records) == [20, 21]
    assert d.records == b"" and d.error is ErrorCode.NONE


def test_full_reader_queue_fails_only_that_partition(tmp_path: Path) -> None:
    st = make_stack(tmp_path, rlm_overrides={"reader_threads": 1, "reader_max_pending_tasks": 1})
    gate = threading.Event()
    try:
        offload(st)
        st.rlm._readers.submit(gate.wait, DEADLINE_S)  # occupy the only thread

        def open_gate_once_queued() -> None:
            wait_until(lambda: st.rlm._readers.in_use == 2, "queued read")
            gate.set()

        opener = threading.Thread(target=open_gate_once_queued)
        opener.start()
        ok, rejected = read(
            st, RemoteFetchRequest(st.log, 0, 1 << 20), RemoteFetchRequest(st.log, 10, 1 << 20)
        )
        opener.join(DEADLINE_S)
        assert offsets(ok.records) == list(range(10))
        assert rejected.error is ErrorCode.UNKNOWN_SERVER_ERROR and rejected.records == b""
    finally:
        gate.set()
        st.close()


def test_bounded_executor_accepts_threads_plus_queue() -> None:
    gate = threading.Event()
    pool = BoundedExecutor(2, 1, "t")
    try:
        futures = [pool.submit(gate.wait, DEADLINE_S) for _ in range(3)]
        with pytest.raises(RejectedExecution):
            pool.submit(gate.wait, DEADLINE_S)
        gate.set()
        for f in futures:
            f.result(DEADLINE_S)
        wait_until(lambda: pool.in_use == 0, "slots released")
        pool.submit(lambda: None).result(DEADLINE_S)
    finally:
        gate.set()
        pool.shutdown()


def test_slow_remote_read_times_out_empty(tmp_path: Path) -> None:
    st = make_stack(tmp_path, rlm_overrides={"remote_fetch_max_wait_ms": 50})
    gate = threading.Event()
    real = st.rsm.fetch_log_segment

    def slow(
        metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> BinaryIO:
        gate.wait(DEADLINE_S)
        return real(metadata, start_position, end_position)

    try:
        offload(st)
        st.rsm.fetch_log_segment = slow  # type: ignore[method-assign]
        (res,) = read(st, RemoteFetchRequest(st.log, 0, 1 << 20))
        assert (res.error, res.records) == (ErrorCode.NONE, b"")
    finally:
        gate.set()
        st.close()


def test_list_offsets_helpers(st: Stack) -> None:
    assert earliest_local_offset(st.log) == (30, 0)
    assert latest_tiered_offset(st.log) == (29, 0)
    st.log.remote_enabled = False
    assert latest_tiered_offset(st.log) == (-1, -1)


def test_timestamp_lookup_uses_remote_only_when_not_local(st: Stack) -> None:
    async def lookup(ts: int) -> tuple[int, int, int | None] | None:
        return await st.rlm.offset_for_timestamp(st.log, ts)

    assert asyncio.run(lookup(1005)) == (5, 1005, 0)
    assert asyncio.run(lookup(1012)) == (12, 1012, 0)
    fetched = len(st.rsm.events())
    assert asyncio.run(lookup(1032)) == (32, 1032, 0)  # local data, no remote calls
    assert len(st.rsm.events()) == fetched
    assert asyncio.run(lookup(99_999)) is None
