"""The coordinator owns the ``__consumer_offsets`` partitions it leads (cluster mode):
loading in the background answers COORDINATOR_LOAD_IN_PROGRESS, a partition it does not own
answers NOT_COORDINATOR, resigning drops the partition's groups and answers waiting joins,
becoming leader again reloads them from the log, a write that outlives its ownership is not
acknowledged, failed appends map to Kafka's codes, and FindCoordinator asks the placement."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from tests.server.group.group_helpers import (
    NODE,
    config,
    join,
    run_async,
    single_member_group,
    sync,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group import GroupCoordinator, MemoryOffsetsStore, OffsetsStoreError
from tierlog.server.group.model import (
    CoordinatorEntry,
    CoordinatorKeyType,
    FindCoordinatorRequest,
    HeartbeatRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
    TopicPartition,
)
from tierlog.server.group.schema import (
    OFFSETS_TOPIC,
    CommittedOffset,
    offset_key,
    offset_value,
    partition_for,
)
from tierlog.server.group.store import KeyValue, LoadedPartition

PARTITIONS = 4
GROUP = "g"
MINE = partition_for(GROUP, PARTITIONS)
TP = TopicPartition("t", 0)


class GatedStore(MemoryOffsetsStore):
    """Loads wait for ``release``; appends fail with ``fail_with`` when set, and wait for
    ``append_gate`` when it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.fail_with: ErrorCode | None = None
        self.append_gate: asyncio.Event | None = None
        self.appending = asyncio.Event()  # set once an append waits at the gate
        self.loads: list[int] = []

    async def load_partition(self, partition: int) -> LoadedPartition:
        self.loads.append(partition)
        await self.release.wait()
        return await super().load_partition(partition)

    async def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        if self.append_gate is not None:
            self.appending.set()
            await self.append_gate.wait()
        if self.fail_with is not None:
            raise OffsetsStoreError(self.fail_with)
        await super().append(partition, records, timestamp_ms, producer=producer)


class FixedPlacement:
    def __init__(self) -> None:
        self.asked: list[int] = []

    async def coordinator_for(self, key: str, partition: int) -> CoordinatorEntry:
        self.asked.append(partition)
        return CoordinatorEntry(key=key, node_id=7, host="h7", port=9097)


@asynccontextmanager
async def cluster_coordinator(
    store: MemoryOffsetsStore, placement: FixedPlacement | None = None
) -> AsyncIterator[GroupCoordinator]:
    c = GroupCoordinator(
        node=NODE,
        store=store,
        config=config(offsets_topic_num_partitions=PARTITIONS),
        placement=placement or FixedPlacement(),
    )
    await c.start()
    try:
        yield c
    finally:
        await c.close()


T = TypeVar("T")


@asynccontextmanager
async def leading_mine(store: GatedStore) -> AsyncIterator[GroupCoordinator]:
    """A cluster coordinator that leads and has loaded ``MINE``, its loads not held back."""
    store.release.set()
    async with cluster_coordinator(store) as c:
        c.became_leader(MINE, 1)
        await loaded(c, MINE)
        yield c


async def held_in_append(
    store: GatedStore, write: Coroutine[Any, Any, T]
) -> tuple[asyncio.Future[T], asyncio.Event]:
    """``write`` started and waiting inside the store's append until the returned gate is set."""
    gate = store.append_gate = asyncio.Event()
    pending = asyncio.ensure_future(write)
    await asyncio.wait_for(store.appending.wait(), 10)
    return pending, gate


def commit_req(offset: int, group: str = GROUP) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        partitions=(OffsetCommitPartition(topic=TP.topic, partition=TP.partition, offset=offset),),
    )


async def commit(c: GroupCoordinator, offset: int, group: str = GROUP) -> ErrorCode:
    return (await c.commit_offsets(commit_req(offset, group))).partitions[0].error_code


async def fetched(c: GroupCoordinator, group: str = GROUP) -> tuple[ErrorCode, int | None]:
    r = await c.fetch_offsets(
        OffsetFetchRequest(groups=(OffsetFetchGroup(group_id=group, partitions=(TP,)),))
    )
    g = r.groups[0]
    return g.error_code, (g.partitions[0].offset if g.partitions else None)


async def loaded(c: GroupCoordinator, partition: int) -> None:
    while not c.owns(partition):
        await asyncio.sleep(0)


@run_async
async def test_nothing_is_owned_before_leadership() -> None:
    async with cluster_coordinator(GatedStore()) as c:
        assert await commit(c, 5) is ErrorCode.NOT_COORDINATOR
        assert (await fetched(c))[0] is ErrorCode.NOT_COORDINATOR
        assert (await join(c, group_id=GROUP)).error_code is ErrorCode.NOT_COORDINATOR


@run_async
async def test_load_in_progress_until_the_partition_is_loaded() -> None:
    store = GatedStore()
    async with leading_mine(store) as c:
        assert await commit(c, 42) is ErrorCode.NONE
    # a later coordinator (another broker, or this one again) loads what was written
    store.release.clear()
    async with cluster_coordinator(store) as c:
        c.became_leader(MINE, 2)
        assert c.loading(MINE)
        assert await commit(c, 43) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert (await fetched(c))[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert (await join(c, group_id=GROUP)).error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        other = next(g for g in ("a", "b", "c", "d", "e") if partition_for(g, PARTITIONS) != MINE)
        assert (await fetched(c, other))[0] is ErrorCode.NOT_COORDINATOR
        store.release.set()
        await loaded(c, MINE)
        assert await fetched(c) == (ErrorCode.NONE, 42)


class OpenTxnStore(GatedStore):
    """A log whose load stops at offset 10 and finds producer 9's transactional offset 77 of
    ``TP`` without its marker."""

    async def load_partition(self, partition: int) -> LoadedPartition:
        loaded = await super().load_partition(partition)
        value = offset_value(CommittedOffset(77, -1, "", commit_timestamp_ms=0))
        loaded.pending = {9: [(offset_key(GROUP, TP), value)]}
        loaded.end_offset = 10
        return loaded


async def stable(c: GroupCoordinator) -> tuple[ErrorCode, int | None]:
    r = await c.fetch_offsets(
        OffsetFetchRequest(
            groups=(OffsetFetchGroup(group_id=GROUP, partitions=(TP,)),), require_stable=True
        )
    )
    p = r.groups[0].partitions[0]
    return p.error_code, p.offset


@run_async
async def test_a_marker_written_while_the_partition_loads_completes_the_loaded_offsets() -> None:
    store = OpenTxnStore()
    async with cluster_coordinator(store) as c:
        c.became_leader(MINE, 1)
        assert c.loading(MINE)
        # the COMMIT lands past where the load's read will stop: it completes what it loads
        c.on_marker(OFFSETS_TOPIC, MINE, 9, True, 12)
        store.release.set()
        await loaded(c, MINE)
        assert await stable(c) == (ErrorCode.NONE, 77)


@run_async
async def test_a_marker_the_load_read_does_not_complete_a_later_transaction() -> None:
    store = OpenTxnStore()
    async with cluster_coordinator(store) as c:
        c.became_leader(MINE, 1)
        # a marker below the load's end was in what it read (an earlier transaction of
        # producer 9): the open one it found stays pending
        c.on_marker(OFFSETS_TOPIC, MINE, 9, True, 4)
        store.release.set()
        await loaded(c, MINE)
        assert (await stable(c))[0] is ErrorCode.UNSTABLE_OFFSET_COMMIT
        c.on_marker(OFFSETS_TOPIC, MINE, 9, False, 13)
        assert await stable(c) == (ErrorCode.NONE, -1)


@run_async
async def test_pending_offsets_of_a_resigned_partition_do_not_outlive_it() -> None:
    """Offsets pending in a transaction are the next leader's business once this coordinator
    resigns: the marker may land there, and a later load here reads the outcome from the log.
    Kept, they would answer UNSTABLE_OFFSET_COMMIT for good after leadership comes back."""
    store = GatedStore()
    async with leading_mine(store) as c:
        reply = await c.commit_offsets(commit_req(55), producer=(9, 0))
        assert reply.partitions[0].error_code is ErrorCode.NONE
        assert (await stable(c))[0] is ErrorCode.UNSTABLE_OFFSET_COMMIT
        c.became_follower(MINE, 2)
        c.became_leader(MINE, 3)
        await loaded(c, MINE)
        assert await stable(c) == (ErrorCode.NONE, -1)


@run_async
async def test_resigning_drops_groups_and_answers_waiting_joins() -> None:
    store = GatedStore()
    async with leading_mine(store) as c:
        assert await commit(c, 7) is ErrorCode.NONE
        member, generation = await single_member_group(c, group_id=GROUP)
        # a second member's join waits for the rebalance ...
        waiting = asyncio.ensure_future(join(c, group_id=GROUP))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        c.became_follower(MINE, 2)
        # ... and is answered NOT_COORDINATOR at once when the partition goes
        assert (await waiting).error_code is ErrorCode.NOT_COORDINATOR
        beat = await c.heartbeat(
            HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member)
        )
        assert beat.error_code is ErrorCode.NOT_COORDINATOR
        assert (await fetched(c))[0] is ErrorCode.NOT_COORDINATOR
        # leader again: the groups come back from the log, as another broker would load them
        c.became_leader(MINE, 3)
        await loaded(c, MINE)
        assert await fetched(c) == (ErrorCode.NONE, 7)
        assert store.loads == [MINE, MINE]


@run_async
async def test_a_write_that_outlives_ownership_is_not_acknowledged() -> None:
    store = GatedStore()
    async with leading_mine(store) as c:
        pending, gate = await held_in_append(store, commit(c, 9))
        c.became_follower(MINE, 2)
        gate.set()
        assert await pending is ErrorCode.NOT_COORDINATOR


@run_async
async def test_failed_appends_answer_kafkas_commit_codes() -> None:
    store = GatedStore()
    async with leading_mine(store) as c:
        expected = {
            ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
            ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REQUEST_TIMED_OUT,
            ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
        }
        for failure, answer in expected.items():
            store.fail_with = failure
            assert await commit(c, 1) is answer, failure
        store.fail_with = None
        assert await commit(c, 2) is ErrorCode.NONE


@run_async
async def test_find_coordinator_asks_the_placement_for_groups() -> None:
    placement = FixedPlacement()
    async with cluster_coordinator(GatedStore(), placement) as c:
        r = await c.find_coordinator(
            FindCoordinatorRequest(key_type=CoordinatorKeyType.GROUP, keys=(GROUP,))
        )
        assert r.coordinators[0].node_id == 7
        assert placement.asked == [MINE]


@run_async
async def test_a_timed_out_assignment_write_answers_rebalance_in_progress() -> None:
    """Kafka's ``storeGroup``: the SyncGroup whose assignment did not reach the ISR in
    ``offsets.commit.timeout.ms`` answers REBALANCE_IN_PROGRESS (the group rebalances)."""
    store = GatedStore()
    async with leading_mine(store) as c:
        store.fail_with = ErrorCode.REQUEST_TIMED_OUT
        joined = await join(c, group_id=GROUP)
        synced = await sync(c, joined.member_id, joined.generation_id, {joined.member_id: b"x"})
        assert synced.error_code is ErrorCode.REBALANCE_IN_PROGRESS


@run_async
async def test_re_election_at_a_higher_epoch_keeps_ownership_and_writes() -> None:
    """An ISR change by the controller bumps the leader epoch with this broker still leader:
    nothing is reloaded and a write in flight is acknowledged."""
    store = GatedStore()
    async with leading_mine(store) as c:
        pending, gate = await held_in_append(store, commit(c, 11))
        c.became_leader(MINE, 2)
        gate.set()
        assert await pending is ErrorCode.NONE
        assert await fetched(c) == (ErrorCode.NONE, 11)
        assert store.loads == [MINE]


@run_async
async def test_a_txn_offset_commit_cancelled_during_its_write_still_joins_the_transaction() -> None:
    """A copier that disconnects mid-TxnOffsetCommit cancels its request, but the offsets it
    sent are in the log; the cache must hold them too, so the COMMIT marker applies them as a
    reload would, and a restarted consumer does not read the copied records again."""
    store = GatedStore()
    async with leading_mine(store) as c:
        committing, gate = await held_in_append(
            store, c.commit_offsets(commit_req(55), producer=(9, 0))
        )
        committing.cancel()
        gate.set()
        try:
            await committing
        except asyncio.CancelledError:
            pass
        assert (await stable(c))[0] is ErrorCode.UNSTABLE_OFFSET_COMMIT
        c.on_marker(OFFSETS_TOPIC, MINE, 9, True, 20)
        assert await stable(c) == (ErrorCode.NONE, 55)
