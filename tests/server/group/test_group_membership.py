"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup rules, driven through GroupCoordinator."""

from __future__ import annotations

import asyncio

from tests.server.group.group_helpers import (
    GROUP,
    RANGE,
    heartbeat,
    join,
    rebalance_announced,
    run_async,
    running,
    single_member_group,
    sync,
    two_member_group,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import (
    DescribeGroupsRequest,
    LeaveGroupRequest,
    LeavingMember,
    ListGroupsRequest,
    Protocol,
)


@run_async
async def test_single_member_join_sync_heartbeat_reaches_stable() -> None:
    async with running() as c:
        joined = await join(c, client_id="alice")
        assert joined.error_code is ErrorCode.NONE
        assert joined.member_id.startswith("alice-")
        assert joined.generation_id == 1
        assert joined.leader == joined.member_id
        assert joined.protocol_type == "consumer"
        assert joined.protocol_name == "range"
        assert [m.member_id for m in joined.members] == [joined.member_id]
        assert joined.members[0].metadata == b"range-subscription"

        synced = await sync(c, joined.member_id, 1, {joined.member_id: b"p0,p1"})
        assert synced.error_code is ErrorCode.NONE
        assert synced.assignment == b"p0,p1"
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")

        assert await heartbeat(c, joined.member_id, 1) is ErrorCode.NONE
        described = (await c.describe_groups(DescribeGroupsRequest(group_ids=(GROUP,)))).groups[0]
        assert described.group_state == "Stable"
        assert described.protocol_data == "range"
        assert described.members[0].assignment == b"p0,p1"


@run_async
async def test_second_member_triggers_rebalance_and_followers_wait_for_leader_sync() -> None:
    async with running() as c:
        m1, gen1 = await single_member_group(c)
        join2 = asyncio.create_task(join(c, client_id="bob"))
        # The existing member learns about the rebalance through its heartbeat.
        await rebalance_announced(c, m1, gen1)
        rejoin1 = await join(c, m1)
        joined2 = await join2
        assert rejoin1.generation_id == joined2.generation_id == gen1 + 1
        assert rejoin1.leader == joined2.leader == m1
        assert {m.member_id for m in rejoin1.members} == {m1, joined2.member_id}
        assert joined2.members == ()

        follower = asyncio.create_task(sync(c, joined2.member_id, gen1 + 1))
        await asyncio.sleep(0)
        assert not follower.done()
        leader = await sync(c, m1, gen1 + 1, {m1: b"a", joined2.member_id: b"b"})
        assert leader.assignment == b"a"
        assert (await follower).assignment == b"b"


@run_async
async def test_initial_rebalance_delay_gathers_members_into_one_generation() -> None:
    async with running(initial_rebalance_delay_ms=300) as c:
        first = asyncio.create_task(join(c, client_id="a"))
        second = asyncio.create_task(join(c, client_id="b"))
        r1, r2 = await asyncio.gather(first, second)
        assert r1.generation_id == r2.generation_id == 1
        leader = r1 if r1.members else r2
        assert len(leader.members) == 2


@run_async
async def test_session_expiry_removes_member_and_rebalances() -> None:
    async with running() as c:
        m1, gen1 = await single_member_group(c, session_timeout_ms=5_000)
        join2 = asyncio.create_task(join(c, client_id="short", session_timeout_ms=200))
        await rebalance_announced(c, m1, gen1)
        await join(c, m1, session_timeout_ms=5_000)
        m2 = (await join2).member_id
        await sync(c, m1, gen1 + 1, {m1: b"a", m2: b"b"})
        # m2 never heartbeats again; m1 keeps heartbeating until the coordinator drops m2.
        await rebalance_announced(c, m1, gen1 + 1)
        assert await heartbeat(c, m2, gen1 + 1) is ErrorCode.UNKNOWN_MEMBER_ID
        rejoined = await join(c, m1, session_timeout_ms=5_000)
        assert rejoined.generation_id == gen1 + 2
        assert [m.member_id for m in rejoined.members] == [m1]


@run_async
async def test_rebalance_timeout_drops_members_that_did_not_rejoin() -> None:
    async with running() as c:
        m1, _ = await single_member_group(c, rebalance_timeout_ms=300)
        started = asyncio.get_running_loop().time()
        joined2 = await join(c, client_id="late", rebalance_timeout_ms=300)
        assert asyncio.get_running_loop().time() - started >= 0.25
        assert joined2.generation_id == 2
        assert joined2.leader == joined2.member_id  # the old leader was removed
        assert [m.member_id for m in joined2.members] == [joined2.member_id]
        assert await heartbeat(c, m1, 1) is ErrorCode.UNKNOWN_MEMBER_ID


@run_async
async def test_member_that_never_syncs_is_removed_after_rebalance_timeout() -> None:
    async with running() as c:
        # Only the leader syncs; m2 never does and is dropped, forcing another rebalance.
        m1, m2, gen = await two_member_group(c, rebalance_timeout_ms=300)
        await rebalance_announced(c, m1, gen)
        assert await heartbeat(c, m2, gen) is ErrorCode.UNKNOWN_MEMBER_ID


@run_async
async def test_leave_group_rebalances_remaining_members_with_new_generation() -> None:
    async with running() as c:
        m1, m2, gen = await two_member_group(c)

        left = await c.leave_group(
            LeaveGroupRequest(
                group_id=GROUP,
                members=(LeavingMember(member_id=m2), LeavingMember(member_id="nobody")),
            )
        )
        assert left.error_code is ErrorCode.NONE
        assert [m.error_code for m in left.members] == [
            ErrorCode.NONE,
            ErrorCode.UNKNOWN_MEMBER_ID,
        ]
        assert await heartbeat(c, m1, gen) is ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = await join(c, m1)
        assert rejoined.generation_id == gen + 1
        assert [m.member_id for m in rejoined.members] == [m1]


@run_async
async def test_last_member_leaving_empties_group() -> None:
    async with running() as c:
        m1, gen1 = await single_member_group(c)
        await c.leave_group(
            LeaveGroupRequest(group_id=GROUP, members=(LeavingMember(member_id=m1),))
        )
        groups = (await c.list_groups(ListGroupsRequest())).groups
        assert [(g.group_id, g.group_state, g.protocol_type) for g in groups] == [
            (GROUP, "Empty", "consumer")
        ]
        # Emptying the group ended a generation, so the next member starts one past it.
        assert (await join(c)).generation_id == gen1 + 2


@run_async
async def test_illegal_generation_on_heartbeat_sync_and_commit() -> None:
    async with running() as c:
        m1, gen = await single_member_group(c)
        assert await heartbeat(c, m1, gen + 5) is ErrorCode.ILLEGAL_GENERATION
        assert (await sync(c, m1, gen - 1)).error_code is ErrorCode.ILLEGAL_GENERATION


@run_async
async def test_unknown_member_is_rejected() -> None:
    async with running() as c:
        assert (await join(c, "ghost")).error_code is ErrorCode.UNKNOWN_MEMBER_ID
        await single_member_group(c)
        assert await heartbeat(c, "ghost", 1) is ErrorCode.UNKNOWN_MEMBER_ID
        assert (await sync(c, "ghost", 1)).error_code is ErrorCode.UNKNOWN_MEMBER_ID
        assert (await join(c, "ghost")).error_code is ErrorCode.UNKNOWN_MEMBER_ID


@run_async
async def test_member_id_required_then_join_with_given_id() -> None:
    async with running() as c:
        first = await join(c, require_known_member_id=True, client_id="rdkafka")
        assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("rdkafka-")
        second = await join(c, first.member_id, require_known_member_id=True)
        assert second.error_code is ErrorCode.NONE
        assert second.member_id == first.member_id
        assert second.leader == first.member_id


@run_async
async def test_follower_rejoin_with_same_metadata_in_stable_keeps_generation() -> None:
    async with running() as c:
        m1, m2, gen = await two_member_group(c)
        again = await join(c, m2)
        assert again.error_code is ErrorCode.NONE
        assert again.generation_id == gen
        assert await heartbeat(c, m1, gen) is ErrorCode.NONE


@run_async
async def test_inconsistent_protocol_type_or_protocols_rejected() -> None:
    async with running() as c:
        await single_member_group(c)
        wrong_type = await join(c, protocol_type="connect")
        assert wrong_type.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        no_common = await join(c, protocols=(Protocol("sticky", b""),))
        assert no_common.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@run_async
async def test_protocol_chosen_by_vote_among_common_protocols() -> None:
    async with running(initial_rebalance_delay_ms=200) as c:
        both = (Protocol("range", b"r"), Protocol("roundrobin", b"rr"))
        rr_only = (Protocol("roundrobin", b"rr2"), Protocol("range", b"r2"))
        results = await asyncio.gather(
            join(c, protocols=both), join(c, protocols=rr_only), join(c, protocols=rr_only)
        )
        assert {r.protocol_name for r in results} == {"roundrobin"}
        leader = next(r for r in results if r.members)
        assert sorted(m.metadata for m in leader.members) == [b"rr", b"rr2", b"rr2"]


@run_async
async def test_session_timeout_outside_bounds_rejected() -> None:
    async with running(min_session_timeout_ms=6000) as c:
        reply = await join(c, session_timeout_ms=100)
        assert reply.error_code is ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await join(c, group_id="")).error_code is ErrorCode.INVALID_GROUP_ID


@run_async
async def test_static_member_rejoin_takes_new_id_and_fences_old_one() -> None:
    async with running() as c:
        leader, gen = await single_member_group(c, group_instance_id="i-leader")
        join2 = asyncio.create_task(join(c, group_instance_id="i-follower"))
        await rebalance_announced(c, leader, gen, "i-leader")
        await join(c, leader, group_instance_id="i-leader")
        old = (await join2).member_id
        assert old.startswith("i-follower-")
        await sync(c, leader, gen + 1, {leader: b"a", old: b"b"})

        # The follower restarts: same instance id, no member id. No rebalance in Stable.
        back = await join(c, group_instance_id="i-follower")
        assert back.error_code is ErrorCode.NONE
        assert back.member_id != old
        assert back.generation_id == gen + 1
        assert (
            await sync(c, back.member_id, gen + 1, group_instance_id="i-follower")
        ).assignment == b"b"
        assert await heartbeat(c, old, gen + 1, "i-follower") is ErrorCode.FENCED_INSTANCE_ID
        assert await heartbeat(c, leader, gen + 1, "i-leader") is ErrorCode.NONE


@run_async
async def test_list_and_describe_groups_report_states() -> None:
    async with running() as c:
        m1, _ = await single_member_group(c, client_id="cli")
        listed = await c.list_groups(ListGroupsRequest(states_filter=("stable",)))
        assert [g.group_id for g in listed.groups] == [GROUP]
        assert (await c.list_groups(ListGroupsRequest(states_filter=("Empty",)))).groups == ()
        described = await c.describe_groups(DescribeGroupsRequest(group_ids=(GROUP, "missing")))
        mine, missing = described.groups
        assert mine.members[0].member_id == m1
        assert mine.members[0].client_id == "cli"
        assert mine.members[0].metadata == RANGE[0].metadata
        assert (missing.error_code, missing.group_state) == (ErrorCode.NONE, "Dead")


@run_async
async def test_unused_member_id_required_expires_and_stops_blocking_the_rebalance() -> None:
    async with running() as c:
        m1, gen1 = await single_member_group(c)
        # A client is handed a member id (KIP-394) and disappears before using it.
        ghost = await join(c, require_known_member_id=True, session_timeout_ms=300)
        assert ghost.error_code is ErrorCode.MEMBER_ID_REQUIRED
        join2 = asyncio.create_task(join(c, client_id="b"))
        await rebalance_announced(c, m1, gen1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        rejoined = await join(c, m1)
        # Completed by the pending id's 300 ms expiry, not the 10 s rebalance timeout.
        assert loop.time() - started < 5
        assert rejoined.generation_id == gen1 + 1
        assert {m.member_id for m in rejoined.members} == {m1, (await join2).member_id}
        late = await join(c, ghost.member_id)
        assert late.error_code is ErrorCode.UNKNOWN_MEMBER_ID


@run_async
async def test_group_max_size_refuses_extra_members() -> None:
    async with running(max_size=1) as c:
        await single_member_group(c)
        assert (await join(c)).error_code is ErrorCode.GROUP_MAX_SIZE_REACHED
        given = await join(c, require_known_member_id=True)
        assert given.error_code is ErrorCode.GROUP_MAX_SIZE_REACHED
