"""Shared set-up for the group coordinator tests: a running coordinator and request makers."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group import (
    CoordinatorNode,
    GroupCoordinator,
    GroupCoordinatorConfig,
    MemoryOffsetsStore,
    OffsetsStore,
)
from tierlog.server.group.model import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    Protocol,
    SyncGroupRequest,
    SyncGroupResponse,
)

T = TypeVar("T")

NODE = CoordinatorNode(node_id=1, host="127.0.0.1", port=9092)
RANGE = (Protocol("range", b"range-subscription"),)
GROUP = "g"


def run_async(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body on a fresh event loop, bounded so a hang fails, not stalls."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), timeout=30))

    return wrapper


def config(**overrides: int) -> GroupCoordinatorConfig:
    base: dict[str, int] = {"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 10}
    base.update(overrides)
    return GroupCoordinatorConfig(**base)


@asynccontextmanager
async def running(
    store: OffsetsStore | None = None, **overrides: int
) -> AsyncIterator[GroupCoordinator]:
    coordinator = GroupCoordinator(
        node=NODE, store=store or MemoryOffsetsStore(), config=config(**overrides)
    )
    await coordinator.start()
    try:
        yield coordinator
    finally:
        await coordinator.close()


def join_req(member_id: str = "", **kw: Any) -> JoinGroupRequest:
    fields: dict[str, Any] = {
        "group_id": GROUP,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": RANGE,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "client_id": "client",
        "client_host": "/127.0.0.1",
    }
    fields.update(kw)
    return JoinGroupRequest(**fields)


async def join(c: GroupCoordinator, member_id: str = "", **kw: Any) -> JoinGroupResponse:
    return await c.join_group(join_req(member_id, **kw))


async def sync(
    c: GroupCoordinator,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    **kw: Any,
) -> SyncGroupResponse:
    return await c.sync_group(
        SyncGroupRequest(
            group_id=kw.pop("group_id", GROUP),
            generation_id=generation,
            member_id=member_id,
            assignments=assignments or {},
            **kw,
        )
    )


async def heartbeat(
    c: GroupCoordinator, member_id: str, generation: int, instance: str | None = None
) -> ErrorCode:
    reply = await c.heartbeat(
        HeartbeatRequest(
            group_id=GROUP,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )
    )
    return reply.error_code


async def poll_until(
    probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], timeout_s: float = 10.0
) -> T:
    """Call ``probe`` until ``done`` holds for its result; fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout_s}s; last: {value!r}")
        await asyncio.sleep(0.005)  # yield to the coordinator's timers between probes


async def single_member_group(c: GroupCoordinator, **kw: Any) -> tuple[str, int]:
    """A Stable group with one member; returns (member id, generation)."""
    joined = await join(c, **kw)
    assert joined.error_code is ErrorCode.NONE
    synced = await sync(c, joined.member_id, joined.generation_id, {joined.member_id: b"all"})
    assert synced.error_code is ErrorCode.NONE
    return joined.member_id, joined.generation_id


async def rebalance_announced(
    c: GroupCoordinator, member_id: str, generation: int, instance: str | None = None
) -> None:
    """Heartbeat as ``member_id`` until the coordinator answers REBALANCE_IN_PROGRESS: the way
    a member of a Stable group learns that it must rejoin."""
    await poll_until(
        lambda: heartbeat(c, member_id, generation, instance),
        lambda e: e is ErrorCode.REBALANCE_IN_PROGRESS,
    )


async def two_member_group(c: GroupCoordinator, **kw: Any) -> tuple[str, str, int]:
    """A one-member group joined by a second member (every join with ``kw``) and rebalanced:
    the first member leads and the leader has synced (assignments ``a`` and ``b``); the
    second has not synced. Returns (leader id, second member id, generation)."""
    m1, gen = await single_member_group(c, **kw)
    join2 = asyncio.create_task(join(c, **kw))
    await rebalance_announced(c, m1, gen)
    await join(c, m1, **kw)
    m2 = (await join2).member_id
    await sync(c, m1, gen + 1, {m1: b"a", m2: b"b"})
    return m1, m2, gen + 1
