"""A broker on the test's own event loop, with one topic: for tests that must see which
thread does what, or hold a step (an fsync) from inside the broker's process."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tierlog.client import WireConnection
from tierlog.config import load_broker_config
from tierlog.log import PartitionLog
from tierlog.server.broker import Broker
from tierlog.server.state import BrokerState


@dataclass
class Running:
    broker: Broker
    client: WireConnection
    plog: PartitionLog
    loop_thread: int

    @property
    def state(self) -> BrokerState:
        assert self.broker.state is not None
        return self.broker.state

    def is_segment(self, fd: int) -> bool:
        """``fd`` is the topic's (only) segment file."""
        st, seg = os.fstat(fd), os.stat(self.plog.active_segment.log_path)
        return (st.st_dev, st.st_ino) == (seg.st_dev, seg.st_ino)


@asynccontextmanager
async def broker_with_topic(
    tmp_path: Path,
    topic: str,
    topic_configs: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
) -> AsyncIterator[Running]:
    """A broker on this loop with ``topic`` (one partition) created with ``topic_configs``."""
    config = load_broker_config(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "metrics.listener": "",
            "remote.log.storage.system.enable": "false",
            "offsets.topic.num.partitions": "1",
            **(overrides or {}),
        }
    )
    broker = Broker(config)
    await broker.start()
    try:
        assert broker.bound is not None and broker.state is not None
        with WireConnection(*broker.bound) as c:
            code, message = await asyncio.to_thread(c.create_topic, topic, 1, dict(topic_configs))
            assert code == 0, message
            plog = broker.state.topics.get_log(topic, 0)
            assert plog is not None
            yield Running(broker, c, plog, threading.get_ident())
    finally:
        await broker.shutdown()


async def until(cond: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll ``cond`` on the loop until it holds; fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)
