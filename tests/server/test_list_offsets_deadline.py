"""ListOffsets v10 (KIP-1075): the partitions of a request are resolved concurrently under
the request's one ``TimeoutMs``; a remote lookup not done by then answers REQUEST_TIMED_OUT
for its partition only."""

from __future__ import annotations

import asyncio
import datetime
import time
from types import SimpleNamespace
from typing import Any

from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.handlers.list_offsets import handle_list_offsets


class _Log:
    remote_enabled = True
    high_watermark = 100
    last_stable_offset = 100
    log_start_offset = 0


class _Rlm:
    """Remote timestamp lookups that finish only when released, honouring the timeout."""

    def __init__(self, slow: set[int]) -> None:
        self.slow = slow
        self.in_flight = 0
        self.most_in_flight = 0
        self.timeouts: list[int | None] = []
        self.release = asyncio.Event()

    async def offset_for_timestamp(
        self, plog: Any, ts: int, timeout_ms: int | None = None
    ) -> tuple[int, int, int | None]:
        self.timeouts.append(timeout_ms)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if plog.index in self.slow:
                assert timeout_ms is not None
                try:
                    await asyncio.wait_for(asyncio.Event().wait(), timeout_ms / 1000)
                except TimeoutError as e:
                    raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "timed out") from e
            await asyncio.sleep(0)
            await asyncio.wait_for(self.release.wait(), 5)
            return (10 + plog.index, ts, 0)
        finally:
            self.in_flight -= 1


def _state(rlm: _Rlm, partitions: int) -> Any:
    logs = {}
    for i in range(partitions):
        plog = _Log()
        plog.index = i  # type: ignore[attr-defined]
        logs[i] = plog
    return SimpleNamespace(
        topics=SimpleNamespace(get_log=lambda name, idx: logs.get(idx)),
        tiering=SimpleNamespace(rlm=rlm),
        replication=None,  # single-node mode
    )


def _request(version: int, partitions: int, timeout_ms: int) -> Any:
    parts = [
        SimpleNamespace(partition_index=i, timestamp=5, current_leader_epoch=-1)
        for i in range(partitions)
    ]
    body = SimpleNamespace(
        isolation_level=0,
        topics=[SimpleNamespace(name="t", partitions=parts)],
        timeout=datetime.timedelta(milliseconds=timeout_ms),
    )
    return SimpleNamespace(body=body, header=SimpleNamespace(api_version=version))


async def _answer(rlm: _Rlm, version: int, partitions: int, timeout_ms: int) -> Any:
    task = asyncio.ensure_future(
        handle_list_offsets(_state(rlm, partitions), _request(version, partitions, timeout_ms))
    )
    deadline = time.monotonic() + 10
    while rlm.in_flight < partitions - len(rlm.slow) and not task.done():
        assert time.monotonic() < deadline, "the lookups never all started"
        await asyncio.sleep(0.001)
    rlm.release.set()
    return await task


def test_partitions_are_looked_up_concurrently_under_the_request_timeout() -> None:
    rlm = _Rlm(slow=set())
    r = asyncio.run(_answer(rlm, 10, 4, 30_000))
    assert rlm.most_in_flight == 4  # all four lookups at once, not one after another
    assert all(t is not None and 0 < t <= 30_000 for t in rlm.timeouts)
    got = [(p.partition_index, p.error_code, p.offset) for p in r.topics[0].partitions]
    assert got == [(i, 0, 10 + i) for i in range(4)]


def test_a_lookup_past_the_deadline_times_out_alone() -> None:
    rlm = _Rlm(slow={1})
    r = asyncio.run(_answer(rlm, 10, 3, 50))
    codes = [p.error_code for p in r.topics[0].partitions]
    assert codes == [0, ErrorCode.REQUEST_TIMED_OUT, 0]


def test_before_v10_the_broker_default_applies() -> None:
    rlm = _Rlm(slow=set())
    asyncio.run(_answer(rlm, 9, 2, 50))
    assert rlm.timeouts == [None, None]
