"""A cold miss in the RemoteIndexCache fetches the offset and time indexes concurrently.

Against an object store each index fetch is a round trip; fetched one after the other they
made the first read of a segment exceed ``remote.fetch.max.wait.ms``. The RSM here is the
real directory storage manager with ``fetch_index`` gated at the plugin boundary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.tiered.manager.test_index_cache import DEADLINE_S, Remote
from tierlog.storage.directory import DirectoryRemoteStorageManager
from tierlog.tiered.api import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteStorageException,
)
from tierlog.tiered.manager.index_cache import IndexCacheClosedError, RemoteIndexCache

OVERLAPPING = (IndexType.OFFSET, IndexType.TIMESTAMP)


Hook = Callable[[RemoteLogSegmentMetadata, IndexType], None]


class HookedRsm(DirectoryRemoteStorageManager):
    """The directory RSM with a fault/gating hook run before each ``fetch_index``."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Hook = lambda md, kind: None

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        self.hook(metadata, index_type)
        return super().fetch_index(metadata, index_type)


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    r = Remote(tmp_path)
    r.rsm.close()
    r.rsm = HookedRsm()
    r.rsm.configure({"dir": str(tmp_path / "remote")})
    yield r
    r.rsm.close()


def set_hook(remote: Remote, hook: Hook) -> None:
    assert isinstance(remote.rsm, HookedRsm)
    remote.rsm.hook = hook


def gate_fetches(remote: Remote, barrier: threading.Barrier) -> list[tuple[IndexType, str]]:
    """Offset and time index fetches each wait at ``barrier`` before reading: with 2 parties
    they can only pass if both are in flight at once. Returns (index, thread name) calls."""
    calls: list[tuple[IndexType, str]] = []

    def gated(md: RemoteLogSegmentMetadata, kind: IndexType) -> None:
        calls.append((kind, threading.current_thread().name))
        if kind in OVERLAPPING:
            barrier.wait()

    set_hook(remote, gated)
    return calls


def test_offset_and_time_index_fetches_overlap(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(100)
    barrier = threading.Barrier(2, timeout=DEADLINE_S)
    calls = gate_fetches(remote, barrier)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        # sequential fetches would break the barrier (BrokenBarrierError) after the deadline
        assert cache.lookup_offset(md, 125) == 200
        assert not barrier.broken
        by_kind = dict(calls)
        assert set(by_kind) == {IndexType.OFFSET, IndexType.TIMESTAMP, IndexType.TRANSACTION}
        assert by_kind[IndexType.OFFSET] == threading.current_thread().name
        assert by_kind[IndexType.TIMESTAMP] != by_kind[IndexType.OFFSET]
        # the loaded entry is complete: time index and transaction index work too
        assert cache.lookup_timestamp(md, 1002, 100) == 200
        assert [(t.producer_id, t.first_offset) for t in cache.aborted_txns(md)] == [(7, 3)]
        assert cache.stats.loads == 1
    finally:
        barrier.abort()
        cache.close()


def test_concurrent_readers_of_one_segment_share_one_overlapped_load(
    remote: Remote, tmp_path: Path
) -> None:
    md = remote.upload(0)
    barrier = threading.Barrier(2, timeout=DEADLINE_S)
    calls = gate_fetches(remote, barrier)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    results: list[int] = []
    errors: list[BaseException] = []

    def read(offset: int) -> None:
        try:
            results.append(cache.lookup_offset(md, offset))
        except BaseException as e:
            errors.append(e)

    try:
        readers = [threading.Thread(target=read, args=(o,)) for o in (5, 15, 25)]
        for t in readers:
            t.start()
        for t in readers:
            t.join(DEADLINE_S * 2)
        assert errors == []
        assert sorted(results) == [0, 100, 200]
        assert sorted(k.name for k, _ in calls) == ["OFFSET", "TIMESTAMP", "TRANSACTION"]
        assert cache.stats.loads == 1
    finally:
        barrier.abort()
        cache.close()


def test_failed_offset_fetch_waits_for_time_fetch_and_caches_nothing(
    remote: Remote, tmp_path: Path
) -> None:
    md = remote.upload(0)
    time_started = threading.Event()
    fail_offset = [True]

    def faulty(m: RemoteLogSegmentMetadata, kind: IndexType) -> None:
        if kind is IndexType.TIMESTAMP:
            time_started.set()
        if kind is IndexType.OFFSET and fail_offset[0]:
            # fail only once the time index fetch is in flight, so the two really overlap
            assert time_started.wait(DEADLINE_S)
            raise RemoteStorageException("injected offset index failure")

    set_hook(remote, faulty)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        with pytest.raises(RemoteStorageException, match="injected"):
            cache.get_entry(md)
        assert len(cache) == 0 and md.remote_log_segment_id.id not in cache
        # the helper's download finished (files in place); the retry fetches only the offset
        fail_offset[0] = False
        before = len(remote.fetches(md))
        assert cache.lookup_offset(md, 25) == 200
        assert remote.fetches(md)[before:] == ["OFFSET"]
    finally:
        cache.close()


def test_failed_time_fetch_fails_the_load_and_skips_the_txn_index(
    remote: Remote, tmp_path: Path
) -> None:
    md = remote.upload(0)

    def faulty(m: RemoteLogSegmentMetadata, kind: IndexType) -> None:
        if kind is IndexType.TIMESTAMP:
            raise RemoteStorageException("injected time index failure")

    set_hook(remote, faulty)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        with pytest.raises(RemoteStorageException, match="injected time"):
            cache.lookup_offset(md, 5)
        assert len(cache) == 0
        assert "TRANSACTION" not in remote.fetches(md)
    finally:
        cache.close()


def test_miss_after_close_raises_closed(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(0)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    cache.close()
    with pytest.raises(IndexCacheClosedError):
        cache.get_entry(md)


def test_close_during_a_load_does_not_hang_the_loader(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(0)
    in_time_fetch = threading.Event()
    release = threading.Event()

    def slow_time(m: RemoteLogSegmentMetadata, kind: IndexType) -> None:
        if kind is IndexType.TIMESTAMP:
            in_time_fetch.set()
            release.wait(DEADLINE_S)

    set_hook(remote, slow_time)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    outcome: list[BaseException | int] = []

    def read() -> None:
        try:
            outcome.append(cache.lookup_offset(md, 5))
        except BaseException as e:
            outcome.append(e)

    loader = threading.Thread(target=read)
    loader.start()
    try:
        assert in_time_fetch.wait(DEADLINE_S)
        cache.close()
        release.set()
        loader.join(DEADLINE_S)
        assert not loader.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], IndexCacheClosedError)
    finally:
        release.set()
        deadline = time.monotonic() + DEADLINE_S
        while loader.is_alive() and time.monotonic() < deadline:
            loader.join(0.1)
