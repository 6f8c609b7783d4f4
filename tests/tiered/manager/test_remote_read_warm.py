"""Warming the next segment never delays the remote read that triggers it.

The object-store plugin's ``warm`` starts with a manifest GET (an object-store round trip);
called inline it would stall a catching-up consumer at every segment boundary. The RSM here is
the real directory storage manager declaring ``SupportsReadAhead``, with a one-byte window
(so each next segment is warmed once, when a read reaches the end of the one before) and a
``warm`` hook the tests set.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tiered.manager.rlm_helpers import DEADLINE_S, Stack, make_stack, offload, wait_until
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.storage.directory import DirectoryRemoteStorageManager
from tierlog.tiered.api import RemoteLogSegmentMetadata, SupportsReadAhead, TopicIdPartition
from tierlog.tiered.manager import RemoteFetchRequest, RemoteFetchResult


class WarmingDirectory(DirectoryRemoteStorageManager, SupportsReadAhead):
    """The directory plugin with the read-ahead capability; ``warm`` calls ``hook``."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[RemoteLogSegmentMetadata], int] = lambda md: 0
        self._asked_lock = threading.Lock()
        self.asked: list[tuple[int, int, int | None]] = []  # (segment start, position, length)

    @property
    def read_ahead_bytes(self) -> int:
        return 1

    def warm(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int = 0,
        length: int | None = None,
    ) -> int:
        with self._asked_lock:
            self.asked.append((metadata.start_offset, start_position, length))
        return self.hook(metadata)

    def seen(self) -> list[tuple[int, int, int | None]]:
        with self._asked_lock:
            return list(self.asked)


class BlockingWarm:
    """A ``warm`` hook that records the segment's start offset and blocks until released."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, md: RemoteLogSegmentMetadata) -> int:
        with self._lock:
            self.calls.append(md.start_offset)
        self.release.wait(DEADLINE_S)
        return 0

    def seen(self) -> list[int]:
        with self._lock:
            return list(self.calls)


@pytest.fixture
def st(tmp_path: Path) -> Iterator[Stack]:
    s = make_stack(tmp_path, rsm=WarmingDirectory())
    offload(s)
    assert s.log.local_log_start_offset == 30
    yield s
    s.close()


def hook(st: Stack, warm: Callable[[RemoteLogSegmentMetadata], int]) -> None:
    assert isinstance(st.rsm, WarmingDirectory)
    st.rsm.hook = warm


def read_offsets(st: Stack, offset: int) -> list[int]:
    results: list[RemoteFetchResult] = asyncio.run(
        st.rlm.read_remote([RemoteFetchRequest(st.log, offset, 1 << 20)], 50 << 20)
    )
    data = results[0].records
    return [r.offset for h in scan_batches(memoryview(data)) for r in iter_records(data, h)]


def test_read_returns_while_the_next_segment_is_still_warming(st: Stack) -> None:
    warm = BlockingWarm()
    hook(st, warm)
    try:
        # segments are tiny: a read of a whole one ends where the next is warmed
        assert read_offsets(st, 0) == list(range(10))
        wait_until(lambda: warm.seen() == [10], "segment 10.. handed to warm")
        assert not warm.release.is_set()  # the read above finished while warm was blocked
        assert read_offsets(st, 5) == list(range(5, 10))
    finally:
        warm.release.set()


def test_each_next_segment_is_warmed_once(st: Stack) -> None:
    warm = BlockingWarm()
    warm.release.set()
    hook(st, warm)
    for offset in (0, 3, 7):  # three reads near the end of segment 0..9
        assert read_offsets(st, offset)[0] == offset
    assert read_offsets(st, 10) == list(range(10, 20))
    # warm calls start in submission order: once 20 is seen, a repeat of 10 would be too
    wait_until(lambda: 20 in warm.seen(), "segment 20.. handed to warm")
    assert warm.seen() == [10, 20]


def test_a_failing_warm_never_fails_the_read_and_is_retried(st: Stack) -> None:
    attempts: list[int] = []

    def failing(md: RemoteLogSegmentMetadata) -> int:
        attempts.append(md.start_offset)
        raise OSError("store unreachable")

    hook(st, failing)
    assert read_offsets(st, 0) == list(range(10))
    wait_until(lambda: attempts == [10], "first warm attempt")
    # a failed warm is forgotten, so the next read of the tail tries again
    wait_until(
        lambda: read_offsets(st, 2)[0] == 2 and len(attempts) >= 2,
        "second warm attempt after the failure",
    )
    assert set(attempts) == {10}


class GrowingDirectory(WarmingDirectory):
    """A read-ahead plugin whose window the test grows, telling the listener it was given
    as the object-store plugin does when a reader waits inside a read."""

    def __init__(self) -> None:
        super().__init__()
        self.window = 1
        self.listener: Callable[[TopicIdPartition], None] | None = None

    def read_ahead_window(self, tip: TopicIdPartition) -> int:
        return self.window

    def watch_window(self, listener: Callable[[TopicIdPartition], None] | None) -> None:
        self.listener = listener


def test_a_window_grown_inside_a_read_is_continued_into_the_next_segments_at_once(
    tmp_path: Path,
) -> None:
    rsm = GrowingDirectory()
    st = make_stack(tmp_path, rsm=rsm)
    try:
        offload(st)
        assert rsm.listener is not None  # the broker's reader listens from its start
        assert read_offsets(st, 0) == list(range(10))
        wait_until(lambda: [a[0] for a in rsm.seen()] == [10], "segment 10.. warmed")
        # the reader, waiting inside its next read, has its window grown by the plugin
        rsm.window = 1 << 20
        rsm.listener(st.remote()[0].topic_id_partition)
        # no read ended since: the last read end is continued against the grown window,
        # as far as the segments the window now reaches (10.. whole, then 20..)
        wait_until(lambda: 20 in [a[0] for a in rsm.seen()], "segment 20.. warmed")
        segment_10 = [a for a in rsm.seen() if a[0] == 10]
        assert segment_10[-1][1] + (segment_10[-1][2] or 0) > 1  # widened past 1 byte
    finally:
        st.close()
    assert rsm.listener is None  # the reader stops listening as it closes
