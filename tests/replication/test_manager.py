"""``ReplicaManager`` mechanisms that let leadership move without a client-visible stall:
an idle fetcher is closed with its connection, and a follower's question with a leader
epoch this broker is about to apply waits for that epoch instead of failing at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.helpers.replica_manager import ME, replica_manager
from tests.server.group.group_helpers import run_async
from tierlog.cluster.cluster_view import PartitionInfo
from tierlog.cluster.znodes import PartitionState
from tierlog.replication.manager import ReplicaManager

TOPIC = "t"


def _apply(m: ReplicaManager, leader: int, epoch: int) -> None:
    state = PartitionState(leader, epoch, (1, 2, 3), 1)
    m._apply(PartitionInfo(TOPIC, 0, (1, 2, 3), (), (), state, epoch))


@run_async
async def test_a_fetcher_left_without_partitions_is_closed(tmp_path: Path) -> None:
    """Kafka's ``shutdownIdleFetcherThreads``: an idle fetcher would keep a connection to a
    broker that may restart, and fail on it the next time that broker leads."""
    async with replica_manager(
        tmp_path,
        {TOPIC: 1},
        replica_fetch_wait_max_ms="60000",
        replica_lag_time_max_ms="60000",
        replica_socket_timeout_ms="60000",
    ) as m:
        _apply(m, 2, 1)
        (fetcher,) = m._fetchers.values()
        assert fetcher.leader_id == 2 and (TOPIC, 0) in fetcher.partitions
        _apply(m, ME, 2)
        assert m._fetchers == {}
        task = fetcher._task
        assert task is not None
        await asyncio.wait({task}, timeout=10)
        assert task.done() and fetcher._conn is None


@run_async
async def test_a_wait_for_a_leader_epoch_ends_when_the_epoch_is_applied(tmp_path: Path) -> None:
    """A follower may read the new state before its new leader does; the leader's answer
    waits for the epoch (here bounded by a 60 s ``replica.fetch.wait.max.ms``) and ends as
    soon as the state is applied, not at the bound."""
    async with replica_manager(
        tmp_path,
        {TOPIC: 1},
        replica_fetch_wait_max_ms="60000",
        replica_lag_time_max_ms="60000",
        replica_socket_timeout_ms="60000",
    ) as m:
        _apply(m, 2, 1)
        waiting = asyncio.create_task(m.wait_for_leader_epoch(TOPIC, 0, 2))
        await asyncio.sleep(0)
        assert not waiting.done()
        _apply(m, 2, 1)  # the same epoch again: still waiting
        await asyncio.sleep(0)
        assert not waiting.done()
        _apply(m, ME, 2)
        await asyncio.wait_for(waiting, 10)
        p = m.partition(TOPIC, 0)
        assert p is not None and p.is_leader and p.leader_epoch == 2
