"""Caches: single flight, failures never cached, frequency-aware eviction, TTL, disk store,
and the token bucket's pacing (with a fake clock, not timed)."""

from __future__ import annotations

import functools
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.storage.objectstore.objectstore_helpers import poll_until
from tierlog.storage.objectstore.cache import (
    Cache,
    SlruPolicy,
    _chunk_file_name,
    disk_chunk_cache,
    memory_cache,
)
from tierlog.storage.objectstore.ratelimit import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_concurrent_readers_of_one_key_share_a_single_load() -> None:
    cache: Cache[str, bytes, bytes] = memory_cache(
        "t", capacity_bytes=1000, ttl_seconds=60, weigher=len
    )
    release = threading.Event()
    calls = 0

    def loader() -> bytes:
        nonlocal calls
        calls += 1
        assert release.wait(10)
        return b"value"

    results: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get("k", loader))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    poll_until(lambda: "k" in cache._flights, what="the first load")  # the first reader is loading
    release.set()
    for t in threads:
        t.join(10)
    assert results == [b"value"] * 8
    assert calls == 1


def test_failed_load_is_not_cached_and_waiters_see_the_error() -> None:
    cache: Cache[str, bytes, bytes] = memory_cache(
        "t", capacity_bytes=1000, ttl_seconds=60, weigher=len
    )

    def failing() -> bytes:
        raise OSError("boom")

    with pytest.raises(OSError, match="boom"):
        cache.get("k", failing)
    assert "k" not in cache
    assert cache.get("k", lambda: b"ok") == b"ok"
    assert cache.stats.load_failures == 1


def test_eviction_keeps_entries_read_twice_over_a_one_pass_scan() -> None:
    cache: Cache[str, bytes, bytes] = memory_cache(
        "t", capacity_bytes=1000, ttl_seconds=60, weigher=len
    )
    for key in ("hot1", "hot2"):
        cache.get(key, lambda: b"h" * 100)
        cache.get(key, lambda: b"never")  # second read: promoted
    for i in range(30):  # a cold sequential scan, 3x the capacity
        cache.get(f"cold{i}", lambda: b"c" * 100)
    assert "hot1" in cache and "hot2" in cache
    assert cache.weight <= 1000
    assert cache.stats.evictions >= 20


def test_entries_expire_after_ttl_without_access() -> None:
    clock = FakeClock()
    cache: Cache[str, bytes, bytes] = memory_cache(
        "t", capacity_bytes=1000, ttl_seconds=10, weigher=len, clock=clock
    )
    cache.get("a", lambda: b"1")
    clock.now = 5
    assert cache.get("a", lambda: b"reloaded") == b"1"  # access refreshes
    clock.now = 14.9
    assert cache.get("a", lambda: b"reloaded") == b"1"
    clock.now = 30
    assert cache.get("a", lambda: b"reloaded") == b"reloaded"


def test_entry_bigger_than_the_cache_is_served_but_not_kept() -> None:
    cache: Cache[str, bytes, bytes] = memory_cache(
        "t", capacity_bytes=10, ttl_seconds=60, weigher=len
    )
    assert cache.get("big", lambda: b"x" * 11) == b"x" * 11
    assert "big" not in cache and cache.weight == 0


def test_prefetched_entry_counts_a_prefetch_hit_once() -> None:
    cache: Cache[str, bytes, bytes] = memory_cache(
        "t", capacity_bytes=1000, ttl_seconds=60, weigher=len
    )
    assert cache.prefetch("p", lambda: b"data")
    assert not cache.prefetch("p", lambda: b"again")  # already resident
    assert cache.get("p", lambda: b"never") == b"data"
    assert cache.get("p", lambda: b"never") == b"data"
    assert cache.stats.prefetch_hits == 1
    assert cache.stats.misses == 1  # only the prefetch load


def test_disk_cache_wipes_its_directory_on_start_and_renames_atomically(tmp_path: Path) -> None:
    directory = tmp_path / "chunks"
    directory.mkdir()
    (directory / "stale-from-last-run").write_bytes(b"old")
    cache = disk_chunk_cache(directory, capacity_bytes=1000, ttl_seconds=60)
    assert list(directory.iterdir()) == []
    assert cache.get(("seg", 0), lambda: b"a" * 300) == b"a" * 300
    files = list(directory.iterdir())
    assert len(files) == 1 and not files[0].name.startswith(".")  # no temp file left
    assert files[0].read_bytes() == b"a" * 300
    assert cache.get(("seg", 0), lambda: b"never") == b"a" * 300


def test_disk_cache_eviction_deletes_files_and_reloads_vanished_ones(tmp_path: Path) -> None:
    cache = disk_chunk_cache(tmp_path / "c", capacity_bytes=1000, ttl_seconds=60)
    for i in range(5):
        cache.get(("seg", i), functools.partial(bytes, [i] * 400))
    assert len(list((tmp_path / "c").iterdir())) == len(cache) == 2
    for f in (tmp_path / "c").iterdir():
        f.unlink()  # e.g. an operator cleaned the directory
    assert cache.get(("seg", 4), lambda: b"reloaded") == b"reloaded"


def test_read_ahead_a_reader_has_had_is_evicted_before_unread_read_ahead() -> None:
    cache: Cache[str, bytes, bytes] = memory_cache(
        "t", capacity_bytes=300, ttl_seconds=60, weigher=len
    )
    for key in ("a", "b", "c"):  # three chunks loaded ahead of their readers
        assert cache.prefetch(key, lambda: b"x" * 100)
    assert cache.get("c", lambda: b"never") == b"x" * 100  # c's reader got it
    cache.get("d", lambda: b"y" * 100)  # room for d: c goes, a and b are still unread
    assert "c" not in cache
    assert "a" in cache and "b" in cache
    # a second read of a retired entry still promotes it over the one-pass ones
    assert cache.get("a", lambda: b"never") == b"x" * 100
    assert cache.get("a", lambda: b"never") == b"x" * 100
    cache.get("e", lambda: b"z" * 100)
    cache.get("f", lambda: b"z" * 100)
    assert "a" in cache


def test_a_vanished_entry_is_forgotten_without_dropping_a_newer_load() -> None:
    policy: SlruPolicy[str, str] = SlruPolicy(1000, 60)
    policy.add("k", "file-1", 10, 0.0, prefetched=False)
    first = policy.lookup("k", 0.0)
    assert first is not None
    policy.add("k", "file-2", 10, 0.0, prefetched=False)  # evicted and reloaded meanwhile
    assert not policy.remove_entry("k", first)  # the reader of file-1 found it gone
    second = policy.lookup("k", 0.0)
    assert second is not None and second.handle == "file-2"
    assert policy.remove_entry("k", second)
    assert "k" not in policy and policy.weight == 0


def test_disk_cache_that_cannot_store_serves_the_value_uncached(tmp_path: Path) -> None:
    directory = tmp_path / "chunks"
    cache = disk_chunk_cache(directory, capacity_bytes=1000, ttl_seconds=60)
    # the file the first entry would be renamed to is in the way: the rename fails
    (directory / f"{_chunk_file_name(('seg', 0))}.1").mkdir()
    (directory / f"{_chunk_file_name(('seg', 0))}.1" / "x").write_bytes(b"")
    assert cache.get(("seg", 0), lambda: b"a" * 300) == b"a" * 300
    assert cache.stats.store_failures == 1 and cache.stats.load_failures == 0
    assert ("seg", 0) not in cache
    assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]  # no partial file
    # the directory is gone altogether (an operator cleaned up): reads still succeed
    shutil.rmtree(directory)
    assert cache.get(("seg", 1), lambda: b"b" * 300) == b"b" * 300
    assert cache.stats.store_failures == 2


def test_token_bucket_paces_to_the_rate_including_oversized_requests() -> None:
    clock = FakeClock()
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    bucket = TokenBucket(1000, clock=clock, sleep=sleep)
    assert bucket.acquire(1000) == 0  # the initial burst
    bucket.acquire(4000)  # larger than the bucket: waits it off
    assert slept == [4.0]
    for _ in range(10):
        bucket.acquire(500)
    assert clock.now == pytest.approx(9.0)  # 9000 bytes beyond the burst at 1000 B/s


def test_a_disk_cache_with_a_writer_serves_from_memory_and_stores_behind(tmp_path: Path) -> None:
    held = threading.Event()
    writer = ThreadPoolExecutor(1)
    writer.submit(held.wait, 30)  # the writer is busy: stores queue behind it
    cache = disk_chunk_cache(
        tmp_path / "cache",
        capacity_bytes=1 << 20,
        ttl_seconds=60,
        writer=writer,
        max_pending_writes=2,
    )
    loads: list[str] = []

    def loader(name: str) -> bytes:
        loads.append(name)
        return name.encode() * 100

    try:
        # served at once, from memory, before anything is on disk; still in flight, so a
        # second reader shares it instead of loading again
        assert cache.get(("a", 0), functools.partial(loader, "a")) == b"a" * 100
        assert not list((tmp_path / "cache").glob("*-0.*"))
        assert cache.get(("a", 0), functools.partial(loader, "a")) == b"a" * 100
        assert cache.load_ahead(("b", 0), functools.partial(loader, "b")) == b"b" * 100
        # two stores wait: a third read is served but not kept ...
        assert cache.get(("c", 0), functools.partial(loader, "c")) == b"c" * 100
        assert cache.stats.store_skipped == 1 and not cache.holds(("c", 0))
        # ... while a prefetch, loaded only to be kept, is stored by its own thread
        assert cache.prefetch(("d", 0), functools.partial(loader, "d"))
        assert ("d", 0) in cache
        held.set()
        poll_until(lambda: ("a", 0) in cache and ("b", 0) in cache, what="stored behind")
        assert loads == ["a", "b", "c", "d"]
    finally:
        held.set()
        writer.shutdown(wait=True)
