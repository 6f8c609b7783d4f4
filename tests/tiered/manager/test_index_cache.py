"""Spec §5.6: the RemoteIndexCache, over the real directory storage manager."""

from __future__ import annotations

import dataclasses
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.tiered.manager.rlm_helpers import TIP
from tierlog.log.index import CorruptIndexError
from tierlog.storage.directory import FETCH_INDEX, DirectoryRemoteStorageManager
from tierlog.tiered.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from tierlog.tiered.manager.index_cache import IndexCacheClosedError, RemoteIndexCache

DEADLINE_S = 10.0


def offset_index(n: int) -> bytes:
    return b"".join(struct.pack(">ii", i * 10, i * 100) for i in range(n))


def time_index(n: int, base_ts: int = 1000) -> bytes:
    return b"".join(struct.pack(">qi", base_ts + i, i * 10) for i in range(n))


TXN = struct.pack(">hqqqq", 0, 7, 3, 9, 12)


class Remote:
    """Uploads synthetic segments through the directory RSM and counts index fetches."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.rsm = DirectoryRemoteStorageManager()
        self.rsm.configure({"dir": str(tmp / "remote")})

    def upload(
        self,
        start: int,
        *,
        entries: int = 4,
        txn: bool = True,
        time_bytes: bytes | None = None,
        offset_bytes: bytes | None = None,
    ) -> RemoteLogSegmentMetadata:
        md = RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP),
            start_offset=start,
            end_offset=start + entries * 10 - 1,
            max_timestamp_ms=0,
            broker_id=0,
            event_timestamp_ms=0,
            segment_size_in_bytes=1,
            custom_metadata=None,
            state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            segment_leader_epochs={0: start},
        )
        d = self.tmp / f"src-{start}-{md.remote_log_segment_id.id}"
        d.mkdir()
        files = {
            "log": b"L",
            "index": offset_bytes if offset_bytes is not None else offset_index(entries),
            "timeindex": time_bytes if time_bytes is not None else time_index(entries),
            "snapshot": b"",
            "txnindex": TXN,
        }
        for name, data in files.items():
            (d / f"s.{name}").write_bytes(data)
        self.rsm.copy_log_segment_data(
            md,
            LogSegmentData(
                log_segment=d / "s.log",
                offset_index=d / "s.index",
                time_index=d / "s.timeindex",
                transaction_index=(d / "s.txnindex") if txn else None,
                producer_snapshot_index=d / "s.snapshot",
                leader_epoch_index=b"0\n0\n",
            ),
        )
        return md

    def fetches(self, md: RemoteLogSegmentMetadata | None = None) -> list[str]:
        return [
            e.index_type or ""
            for e in self.rsm.events(FETCH_INDEX)
            if md is None or e.segment_id == str(md.remote_log_segment_id.id)
        ]


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    r = Remote(tmp_path)
    yield r
    r.rsm.close()


def entry_weight(entries: int = 4) -> int:
    return entries * 8 + entries * 12 + len(TXN)


def wait_until(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_files_named_by_start_and_uuid_and_fetched_once(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(100)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        assert cache.lookup_offset(md, 125) == 200
        assert cache.lookup_offset(md, 100_000) == 300  # past the last entry
        assert cache.lookup_offset(md, 5) == 0  # below the base
        assert sorted(remote.fetches()) == ["OFFSET", "TIMESTAMP", "TRANSACTION"]
        stem = f"100_{md.remote_log_segment_id.id}"
        names = sorted(p.name for p in (tmp_path / "logs" / "remote-log-index-cache").iterdir())
        assert names == [f"{stem}.index", f"{stem}.timeindex", f"{stem}.txnindex"]
        assert cache.stats.misses == 1 and cache.stats.hits == 2
    finally:
        cache.close()


def test_missing_remote_txn_index_becomes_empty_file(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(0, txn=False)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        assert cache.aborted_txns(md) == []
        txn = cache.dir / f"0_{md.remote_log_segment_id.id}.txnindex"
        assert txn.exists() and txn.stat().st_size == 0
    finally:
        cache.close()


def test_aborted_txns_and_timestamp_lookup(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(100)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in cache.aborted_txns(md)] == [
            (7, 3, 9)
        ]
        assert cache.lookup_timestamp(md, 1002, 100) == 200  # ts 1002 -> offset 120 -> pos 200
        assert cache.lookup_timestamp(md, 0, 100) == 0
        assert cache.lookup_timestamp(md, 1000, 131) == 300  # starting offset wins
    finally:
        cache.close()


def test_third_entry_evicts_one_and_refetch_calls_remote(remote: Remote, tmp_path: Path) -> None:
    a, b, c = remote.upload(0), remote.upload(100), remote.upload(200)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm, 2 * entry_weight(), cleaner_delay_s=0)
    try:
        for md in (a, b, c):
            cache.get_entry(md)
        assert len(cache) == 2 and cache.stats.evictions == 1
        present = [md for md in (a, b, c) if md.remote_log_segment_id.id in cache]
        assert a in present or b in present
        evicted = next(md for md in (a, b, c) if md not in present)
        before = len(remote.fetches(evicted))
        cache.get_entry(evicted)
        assert len(remote.fetches(evicted)) == before + 3
    finally:
        cache.close()


def test_a_budget_below_one_entry_still_serves_each_lookup_with_one_load(
    remote: Remote, tmp_path: Path
) -> None:
    """Kafka's OffloadAndTxnConsumeFromLeaderTest sets the cache to 1 byte: the entry just
    loaded is used, then makes room for the next one; no lookup reloads it in a loop."""
    a, b = remote.upload(0), remote.upload(100)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm, 1, cleaner_delay_s=0)
    try:
        assert cache.lookup_offset(a, 25) == 200
        assert cache.lookup_offset(b, 125) == 200
        assert cache.lookup_offset(a, 5) == 0
        assert len(cache) == 1
        assert len(remote.fetches(a)) == 6 and len(remote.fetches(b)) == 3
    finally:
        cache.close()


def test_an_empty_uploaded_txn_index_is_not_fetched(remote: Remote, tmp_path: Path) -> None:
    md = dataclasses.replace(remote.upload(0, txn=False), txn_idx_empty=True)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        assert cache.aborted_txns(md) == []
        assert sorted(remote.fetches(md)) == ["OFFSET", "TIMESTAMP"]
    finally:
        cache.close()


def test_close_is_idempotent_keeps_files_and_stops_cleaner(remote: Remote, tmp_path: Path) -> None:
    a, b = remote.upload(0), remote.upload(100)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    cache.get_entry(a)
    cache.get_entry(b)
    cache.close()
    cache.close()
    with pytest.raises(IndexCacheClosedError):
        cache.get_entry(a)
    assert not cache._cleaner.is_alive()
    assert len(list(cache.dir.iterdir())) == 6
    fetched = len(remote.fetches())
    reopened = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        assert len(reopened) == 2
        assert reopened.lookup_offset(a, 20) == 200
        assert reopened.lookup_offset(b, 120) == 200
        assert len(remote.fetches()) == fetched  # rehydrated, no remote calls
    finally:
        reopened.close()


def test_remove_renames_to_deleted_then_cleaner_deletes(remote: Remote, tmp_path: Path) -> None:
    a, b = remote.upload(0), remote.upload(100)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm, cleaner_delay_s=0.2)
    try:
        cache.get_entry(a)
        cache.get_entry(b)
        stem = f"0_{a.remote_log_segment_id.id}"
        (cache.dir / f"{stem}.index.deleted").write_bytes(b"stale")
        cache.remove(a.remote_log_segment_id.id)
        cache.remove(uuid.uuid4())  # unknown: no-op
        assert a.remote_log_segment_id.id not in cache
        names = {p.name for p in cache.dir.iterdir()}
        assert f"{stem}.index.deleted" in names and f"{stem}.index" not in names
        wait_until(lambda: not any(p.name.startswith(stem) for p in cache.dir.iterdir()), "cleanup")
        cache.remove_all([b.remote_log_segment_id.id])
        wait_until(lambda: not list(cache.dir.iterdir()), "cleanup of b")
        assert len(cache) == 0 and cache.total_bytes == 0
    finally:
        cache.close()


def test_resize_evicts_and_keeps_newest(remote: Remote, tmp_path: Path) -> None:
    a, b = remote.upload(0), remote.upload(100)
    w = entry_weight()
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm, 2 * w, cleaner_delay_s=0)
    try:
        cache.get_entry(a)
        cache.get_entry(b)
        cache.resize(1)
        assert len(cache) == 0
        wait_until(lambda: not list(cache.dir.iterdir()), "all files deleted")
        cache.resize(2 * w)
        cache.get_entry(a)
        cache.get_entry(b)
        cache.get_entry(b)
        for size in (w, w, 2 * w):
            cache.resize(size)
        assert len(cache) == 1 and b.remote_log_segment_id.id in cache
        stem = f"100_{b.remote_log_segment_id.id}"
        wait_until(lambda: {p.name.split(".")[0] for p in cache.dir.iterdir()} == {stem}, "b kept")
    finally:
        cache.close()


def test_corrupt_file_on_disk_is_refetched(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(0)
    cache_dir = tmp_path / "logs" / "remote-log-index-cache"
    cache_dir.mkdir(parents=True)
    stem = f"0_{md.remote_log_segment_id.id}"
    (cache_dir / f"{stem}.index").write_bytes(b"bad")  # not a multiple of 8
    (cache_dir / f"{stem}.timeindex").write_bytes(time_index(4))
    (cache_dir / f"{stem}.txnindex").write_bytes(TXN)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        assert len(cache) == 0  # the damaged triplet was not rehydrated
        assert cache.lookup_offset(md, 30) == 300
        assert sorted(remote.fetches(md)) == ["OFFSET", "TIMESTAMP", "TRANSACTION"]
    finally:
        cache.close()


def test_good_files_on_disk_are_reused_without_remote_calls(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(0)
    cache_dir = tmp_path / "logs" / "remote-log-index-cache"
    cache_dir.mkdir(parents=True)
    stem = f"0_{md.remote_log_segment_id.id}"
    (cache_dir / f"{stem}.index").write_bytes(offset_index(4))
    (cache_dir / f"{stem}.timeindex").write_bytes(time_index(4))
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        assert len(cache) == 0  # incomplete triplet: not rehydrated
        cache.get_entry(md)
        assert remote.fetches(md) == ["TRANSACTION"]
    finally:
        cache.close()


def test_corrupt_remote_index_raises_and_is_not_cached(remote: Remote, tmp_path: Path) -> None:
    md = remote.upload(0, time_bytes=struct.pack(">qi", 5, 10) + struct.pack(">qi", 1, 20))
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        with pytest.raises(CorruptIndexError):
            cache.get_entry(md)
        assert len(cache) == 0
        # offset and time index are fetched concurrently (either order); no txn fetch
        assert sorted(remote.fetches(md)) == ["OFFSET", "TIMESTAMP"]
        # the remote copy is repaired; only the damaged index is fetched again
        remote_time = next((remote.rsm.root).rglob("*.timeindex"))
        remote_time.write_bytes(time_index(4))
        cache.get_entry(md)
        assert remote.fetches(md)[2:] == ["TIMESTAMP", "TRANSACTION"]
    finally:
        cache.close()


def test_hit_not_blocked_by_concurrent_miss(remote: Remote, tmp_path: Path) -> None:
    a, b = remote.upload(0), remote.upload(100)
    release = threading.Event()
    entered = threading.Event()
    real = remote.rsm.fetch_index

    def slow_fetch(metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        if metadata == b:
            entered.set()
            release.wait(DEADLINE_S)
        return real(metadata, index_type)

    remote.rsm.fetch_index = slow_fetch  # type: ignore[method-assign]
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm)
    try:
        cache.get_entry(a)
        results: list[int] = []
        miss = threading.Thread(target=lambda: results.append(cache.lookup_offset(b, 110)))
        second = threading.Thread(target=lambda: results.append(cache.lookup_offset(b, 120)))
        miss.start()
        assert entered.wait(DEADLINE_S)
        second.start()
        assert cache.lookup_offset(a, 10) == 100  # served while b is still loading
        release.set()
        miss.join(DEADLINE_S)
        second.join(DEADLINE_S)
        assert sorted(results) == [100, 200]
        assert remote.fetches(b).count("OFFSET") == 1  # one shared download
    finally:
        release.set()
        cache.close()


def test_concurrent_remove_and_read_stay_consistent(remote: Remote, tmp_path: Path) -> None:
    segs = [remote.upload(i * 100) for i in range(4)]
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm, cleaner_delay_s=0)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for i in range(200):
                md = segs[i % 4]
                assert cache.lookup_offset(md, md.start_offset + 10) == 100
        except BaseException as e:
            errors.append(e)

    def remover() -> None:
        for i in range(200):
            cache.remove(segs[i % 4].remote_log_segment_id.id)

    threads = [threading.Thread(target=reader), threading.Thread(target=remover)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S * 3)
    try:
        assert errors == []
        live = {e for e in (s.remote_log_segment_id.id for s in segs) if e in cache}
        assert cache.total_bytes == len(live) * entry_weight()
        wait_until(
            lambda: (
                {uuid.UUID(p.name.split(".")[0].split("_")[1]) for p in cache.dir.iterdir()} == live
            ),
            "files match the live entries",
        )
    finally:
        cache.close()


def test_idle_entries_expire_after_ttl(remote: Remote, tmp_path: Path) -> None:
    now = [0]
    md = remote.upload(0)
    cache = RemoteIndexCache(tmp_path / "logs", remote.rsm, ttl_ms=1000, clock_ms=lambda: now[0])
    try:
        cache.get_entry(md)
        now[0] = 999
        assert cache.expire_idle() == 0
        now[0] = 2000
        assert cache.expire_idle() == 1
        assert len(cache) == 0
    finally:
        cache.close()
