"""``flush.messages``: the fsync it demands runs off the event loop, and the producer is
answered only once it is done (a broker in this process, so the loop thread is known)."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.helpers.inprocess_broker import Running, broker_with_topic, until
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import SimpleRecord, build_batch

TOPIC = "flushed"


@asynccontextmanager
async def broker_with_flushed_topic(tmp_path: Path) -> AsyncIterator[Running]:
    """A broker on this loop with topic ``flushed`` at ``flush.messages=1``."""
    async with broker_with_topic(tmp_path, TOPIC, {"flush.messages": "1"}) as run:
        yield run


def _produce(c: WireConnection) -> tuple[int, int]:
    batch = build_batch([SimpleRecord(b"durable")], timestamp=int(time.time() * 1000))
    r = c.call(
        ApiKey.PRODUCE,
        9,
        transactional_id=None,
        acks=1,
        timeout=30_000,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
    )
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def test_flush_messages_fsyncs_off_the_loop_and_answers_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment_fsyncs: list[int] = []  # the threads that fsynced the topic's segment
    release = threading.Event()
    real = os.fsync

    async def scenario() -> None:
        async with broker_with_flushed_topic(tmp_path) as run:

            def fsync(fd: int) -> None:
                if run.is_segment(fd):
                    segment_fsyncs.append(threading.get_ident())
                    if threading.get_ident() != run.loop_thread:
                        release.wait(10)
                real(fd)

            monkeypatch.setattr(os, "fsync", fsync)
            try:
                produce = asyncio.ensure_future(asyncio.to_thread(_produce, run.client))
                await until(lambda: bool(segment_fsyncs) or produce.done())
                # the fsync is now held: an answer sent before it would arrive within this
                # window, which is the one thing a negative assertion can wait for
                await asyncio.sleep(0.2)
                assert run.loop_thread not in segment_fsyncs, "fsynced on the event loop"
                assert not produce.done(), "answered before the fsync flush.messages demands"
                release.set()
                assert await produce == (0, 0)
                assert run.plog.recovery_point == 1
            finally:
                release.set()
                monkeypatch.undo()

    asyncio.run(scenario())
    assert segment_fsyncs, "flush.messages=1 did not fsync the segment"


def test_a_failed_fsync_answers_unknown_server_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.fsync

    async def scenario() -> None:
        async with broker_with_flushed_topic(tmp_path) as run:

            def fsync(fd: int) -> None:
                if run.is_segment(fd):
                    raise OSError(errno.EIO, "injected")
                real(fd)

            monkeypatch.setattr(os, "fsync", fsync)
            try:
                code, _ = await asyncio.to_thread(_produce, run.client)
                assert code == ErrorCode.UNKNOWN_SERVER_ERROR
                assert run.plog.recovery_point == 0
            finally:
                monkeypatch.undo()
            assert await asyncio.to_thread(_produce, run.client) == (0, 1)
            assert run.plog.recovery_point == 2

    asyncio.run(scenario())
