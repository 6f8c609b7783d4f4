"""OffsetCommit / OffsetFetch / DeleteGroups / retention, and surviving a coordinator restart."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tests.server.group.group_helpers import (
    GROUP,
    NODE,
    config,
    heartbeat,
    join,
    rebalance_announced,
    run_async,
    running,
    single_member_group,
    sync,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group import GroupCoordinator, MemoryOffsetsStore, OffsetsStoreError
from tierlog.server.group.model import (
    DeleteGroupsRequest,
    FindCoordinatorRequest,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchGroup,
    OffsetFetchRequest,
    TopicPartition,
)
from tierlog.server.group.store import KeyValue


def commit_req(
    offsets: dict[tuple[str, int], int],
    group_id: str = GROUP,
    generation: int = -1,
    member_id: str = "",
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        partitions=tuple(
            OffsetCommitPartition(topic=t, partition=p, offset=o, leader_epoch=3, metadata="m")
            for (t, p), o in offsets.items()
        ),
    )


async def committed(
    c: GroupCoordinator, group_id: str = GROUP, partitions: Sequence[tuple[str, int]] | None = None
) -> dict[tuple[str, int], int]:
    wanted = None if partitions is None else tuple(TopicPartition(*tp) for tp in partitions)
    reply = await c.fetch_offsets(
        OffsetFetchRequest(groups=(OffsetFetchGroup(group_id=group_id, partitions=wanted),))
    )
    (group,) = reply.groups
    assert group.error_code is ErrorCode.NONE
    return {(p.topic, p.partition): p.offset for p in group.partitions}


def codes(reply: OffsetCommitResponse) -> list[ErrorCode]:
    return [p.error_code for p in reply.partitions]


@run_async
async def test_simple_commit_without_group_then_fetch() -> None:
    async with running() as c:
        reply = await c.commit_offsets(commit_req({("t", 0): 42, ("t", 1): 7}))
        assert codes(reply) == [ErrorCode.NONE, ErrorCode.NONE]
        assert await committed(c, partitions=[("t", 0), ("t", 1), ("t", 2)]) == {
            ("t", 0): 42,
            ("t", 1): 7,
            ("t", 2): -1,
        }
        assert await committed(c) == {("t", 0): 42, ("t", 1): 7}
        fetched = await c.fetch_offsets(
            OffsetFetchRequest(groups=(OffsetFetchGroup(group_id=GROUP, partitions=None),))
        )
        first = fetched.groups[0].partitions[0]
        assert (first.leader_epoch, first.metadata) == (3, "m")


@run_async
async def test_fetch_several_groups_and_unknown_group() -> None:
    async with running() as c:
        await c.commit_offsets(commit_req({("a", 0): 1}, group_id="g1"))
        await c.commit_offsets(commit_req({("b", 0): 2}, group_id="g2"))
        reply = await c.fetch_offsets(
            OffsetFetchRequest(
                groups=(
                    OffsetFetchGroup(group_id="g1", partitions=None),
                    OffsetFetchGroup(group_id="g2", partitions=(TopicPartition("b", 0),)),
                    OffsetFetchGroup(group_id="nope", partitions=(TopicPartition("b", 0),)),
                    OffsetFetchGroup(group_id="nope", partitions=None),
                )
            )
        )
        got = [(g.group_id, [(p.topic, p.offset) for p in g.partitions]) for g in reply.groups]
        assert got == [("g1", [("a", 1)]), ("g2", [("b", 2)]), ("nope", [("b", -1)]), ("nope", [])]


@run_async
async def test_group_member_commit_checks_generation_and_member() -> None:
    async with running() as c:
        m1, gen = await single_member_group(c)
        ok = await c.commit_offsets(commit_req({("t", 0): 5}, generation=gen, member_id=m1))
        assert codes(ok) == [ErrorCode.NONE]
        stale = await c.commit_offsets(commit_req({("t", 0): 6}, generation=gen - 1, member_id=m1))
        assert codes(stale) == [ErrorCode.ILLEGAL_GENERATION]
        stranger = await c.commit_offsets(commit_req({("t", 0): 6}, generation=gen, member_id="x"))
        assert codes(stranger) == [ErrorCode.UNKNOWN_MEMBER_ID]
        # A simple commit into a group that has members is not allowed either.
        simple = await c.commit_offsets(commit_req({("t", 0): 6}))
        assert codes(simple) == [ErrorCode.UNKNOWN_MEMBER_ID]
        gone = await c.commit_offsets(commit_req({("t", 0): 6}, group_id="other", generation=1))
        assert codes(gone) == [ErrorCode.ILLEGAL_GENERATION]
        assert await committed(c) == {("t", 0): 5}


@run_async
async def test_commit_during_completing_rebalance_is_rejected() -> None:
    async with running() as c:
        m1, gen = await single_member_group(c)
        join2 = asyncio.create_task(join(c))
        await rebalance_announced(c, m1, gen)
        # PreparingRebalance still accepts commits from the current generation...
        prep = await c.commit_offsets(commit_req({("t", 0): 1}, generation=gen, member_id=m1))
        assert codes(prep) == [ErrorCode.NONE]
        await join(c, m1)
        await join2
        # ...but CompletingRebalance does not: assignments are about to change.
        during = await c.commit_offsets(commit_req({("t", 0): 2}, generation=gen + 1, member_id=m1))
        assert codes(during) == [ErrorCode.REBALANCE_IN_PROGRESS]


@run_async
async def test_oversized_metadata_rejected_per_partition() -> None:
    async with running(offset_metadata_max_bytes=4) as c:
        reply = await c.commit_offsets(
            OffsetCommitRequest(
                group_id=GROUP,
                partitions=(
                    OffsetCommitPartition(topic="t", partition=0, offset=1, metadata="short"),
                    OffsetCommitPartition(topic="t", partition=1, offset=1, metadata="ok"),
                ),
            )
        )
        assert codes(reply) == [ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.NONE]
        assert await committed(c) == {("t", 1): 1}


@run_async
async def test_delete_groups_refuses_non_empty_and_deletes_empty() -> None:
    async with running() as c:
        m1, gen = await single_member_group(c)
        await c.commit_offsets(commit_req({("t", 0): 9}, generation=gen, member_id=m1))
        await c.commit_offsets(commit_req({("t", 0): 1}, group_id="simple"))
        reply = await c.delete_groups(DeleteGroupsRequest(group_ids=(GROUP, "simple", "missing")))
        assert [r.error_code for r in reply.results] == [
            ErrorCode.NON_EMPTY_GROUP,
            ErrorCode.NONE,
            ErrorCode.GROUP_ID_NOT_FOUND,
        ]
        assert await committed(c, "simple") == {}

        await c.leave_group(
            LeaveGroupRequest(group_id=GROUP, members=(LeavingMember(member_id=m1),))
        )
        again = await c.delete_groups(DeleteGroupsRequest(group_ids=(GROUP,)))
        assert [r.error_code for r in again.results] == [ErrorCode.NONE]
        assert await committed(c) == {}


@run_async
async def test_offsets_and_group_survive_restart_but_deleted_groups_do_not() -> None:
    store = MemoryOffsetsStore()
    async with running(store) as c:
        m1, gen = await single_member_group(c)
        await c.commit_offsets(commit_req({("t", 0): 100}, generation=gen, member_id=m1))
        await c.commit_offsets(commit_req({("t", 0): 5}, group_id="gone"))
        await c.delete_groups(DeleteGroupsRequest(group_ids=("gone",)))
        await c.commit_offsets(commit_req({("t", 0): 101}, generation=gen, member_id=m1))
    async with running(store) as c2:
        assert await committed(c2) == {("t", 0): 101}
        assert await committed(c2, "gone") == {}
        # The member outlived the restart: it keeps its id, generation and assignment.
        assert await heartbeat(c2, m1, gen) is ErrorCode.NONE
        assert (await sync(c2, m1, gen)).assignment == b"all"


@run_async
async def test_offsets_expire_after_group_is_empty_for_retention() -> None:
    now = [1_000_000]
    store = MemoryOffsetsStore()
    c = GroupCoordinator(
        node=NODE, store=store, config=config(offsets_retention_ms=1000), clock_ms=lambda: now[0]
    )
    await c.start()
    await c.commit_offsets(commit_req({("t", 0): 1}))
    now[0] += 999
    assert await c.expire_offsets() == 0
    now[0] += 1
    assert await c.expire_offsets() == 1
    assert await committed(c) == {}
    await c.close()
    restarted = GroupCoordinator(node=NODE, store=store, config=config())
    await restarted.start()
    assert await committed(restarted) == {}
    await restarted.close()


class FailingStore(MemoryOffsetsStore):
    """Injects append failures at the store boundary, as a full or broken disk would."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_with: ErrorCode | None = None

    async def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        if self.fail_with is not None:
            raise OffsetsStoreError(self.fail_with, "injected")
        await super().append(partition, records, timestamp_ms, producer=producer)


@run_async
async def test_failed_writes_surface_as_coordinator_errors() -> None:
    store = FailingStore()
    async with running(store) as c:
        store.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        reply = await c.commit_offsets(commit_req({("t", 0): 1}))
        assert codes(reply) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
        assert await committed(c) == {}

        joined = await join(c)
        synced = await sync(c, joined.member_id, joined.generation_id, {joined.member_id: b"x"})
        # The assignment was not written, so nobody gets it and the group rebalances.
        assert synced.error_code is ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert (
            await heartbeat(c, joined.member_id, joined.generation_id)
            is ErrorCode.REBALANCE_IN_PROGRESS
        )


@run_async
async def test_find_coordinator_answers_this_node_for_every_key() -> None:
    async with running() as c:
        reply = await c.find_coordinator(FindCoordinatorRequest(keys=("a", "b")))
        assert [(e.key, e.node_id, e.host, e.port, e.error_code) for e in reply.coordinators] == [
            ("a", 1, "127.0.0.1", 9092, ErrorCode.NONE),
            ("b", 1, "127.0.0.1", 9092, ErrorCode.NONE),
        ]
        bad = await c.find_coordinator(FindCoordinatorRequest(key_type=2, keys=("s",)))
        assert bad.coordinators[0].error_code is ErrorCode.INVALID_REQUEST
