"""``flush.messages``: the fsync it demands runs off the event loop, and the producer is
answered only once it is done (a broker in this process, so the loop thread is known)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tierlog.client import WireConnection
from tierlog.config import load_broker_config
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.server.broker import Broker

TOPIC = "flushed"


def _produce(c: WireConnection) -> tuple[int, int]:
    batch = build_batch([SimpleRecord(b"durable")], timestamp=int(time.time() * 1000))
    r = c.call(
        0,
        9,
        transactional_id=None,
        acks=1,
        timeout=30_000,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
    )
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


async def _until(cond: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_flush_messages_fsyncs_off_the_loop_and_answers_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_broker_config(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "metrics.listener": "",
            "remote.log.storage.system.enable": "false",
            "offsets.topic.num.partitions": "1",
        }
    )
    segment_fsyncs: list[int] = []  # the threads that fsynced the topic's segment
    release = threading.Event()

    async def scenario() -> None:
        broker = Broker(config)
        await broker.start()
        loop_thread = threading.get_ident()
        assert broker.bound is not None and broker.state is not None
        try:
            with WireConnection(*broker.bound) as c:
                code, message = await asyncio.to_thread(
                    c.create_topic, TOPIC, 1, {"flush.messages": "1"}
                )
                assert code == 0, message
                plog = broker.state.topics.get_log(TOPIC, 0)
                assert plog is not None
                segment = os.stat(plog.active_segment.log_path)
                real = os.fsync

                def fsync(fd: int) -> None:
                    st = os.fstat(fd)
                    if (st.st_dev, st.st_ino) == (segment.st_dev, segment.st_ino):
                        segment_fsyncs.append(threading.get_ident())
                        if threading.get_ident() != loop_thread:
                            release.wait(10)
                    real(fd)

                monkeypatch.setattr(os, "fsync", fsync)
                produce = asyncio.ensure_future(asyncio.to_thread(_produce, c))
                await _until(lambda: bool(segment_fsyncs) or produce.done())
                await asyncio.sleep(0.2)
                assert loop_thread not in segment_fsyncs, "fsynced on the event loop"
                assert not produce.done(), "answered before the fsync flush.messages demands"
                release.set()
                assert await produce == (0, 0)
                assert plog.recovery_point == 1
        finally:
            release.set()
            monkeypatch.undo()
            await broker.shutdown()
        assert segment_fsyncs, "flush.messages=1 did not fsync the segment"
        assert loop_thread not in segment_fsyncs, "fsynced on the event loop"

    asyncio.run(scenario())
