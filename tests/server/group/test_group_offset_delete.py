"""OffsetDelete (API 47) on the coordinator: Kafka's group rules, and its tombstones."""

from __future__ import annotations

import struct

from tests.server.group.group_helpers import (
    GROUP,
    NODE,
    config,
    run_async,
    running,
    single_member_group,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group import GroupCoordinator, MemoryOffsetsStore
from tierlog.server.group.consumer_protocol import subscribed_topics
from tierlog.server.group.model import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
    Protocol,
    TopicPartition,
)
from tierlog.server.group.schema import OffsetKey, decode_key


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def commit(
    group_id: str, tps: list[tuple[str, int]], gen: int = -1, member: str = ""
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=gen,
        member_id=member,
        partitions=tuple(OffsetCommitPartition(topic=t, partition=p, offset=10) for t, p in tps),
    )


async def committed(c: GroupCoordinator, group_id: str) -> set[tuple[str, int]]:
    reply = await c.fetch_offsets(
        OffsetFetchRequest(groups=(OffsetFetchGroup(group_id=group_id, partitions=None),))
    )
    return {(p.topic, p.partition) for p in reply.groups[0].partitions}


def delete(group_id: str, *tps: tuple[str, int]) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(
        group_id=group_id, partitions=tuple(TopicPartition(t, p) for t, p in tps)
    )


def test_subscription_topics_are_read_from_every_version_prefix() -> None:
    assert subscribed_topics(subscription("a", "b")) == frozenset({"a", "b"})
    assert subscribed_topics(
        b"\x00\x03" + subscription("x")[2:] + b"trailing v3 fields"
    ) == frozenset({"x"})
    assert subscribed_topics(b"") is None
    assert subscribed_topics(b"\x00\x00\x00\x00\x00\x05ab") is None


@run_async
async def test_empty_group_loses_offsets_and_tombstones_are_written() -> None:
    store = MemoryOffsetsStore()
    async with running(store) as c:
        await c.commit_offsets(commit("simple", [("t", 0), ("t", 1), ("u", 0)]))
        reply = await c.delete_offsets(delete("simple", ("t", 0), ("u", 0), ("never", 3)))
        assert reply.error_code is ErrorCode.NONE
        assert [(p.topic, p.partition, p.error_code) for p in reply.partitions] == [
            ("t", 0, ErrorCode.NONE),
            ("u", 0, ErrorCode.NONE),
            ("never", 3, ErrorCode.NONE),
        ]
        assert await committed(c, "simple") == {("t", 1)}
    tombstones = [decode_key(k) for p in store.partitions.values() for k, v in p if v is None]
    assert tombstones == [OffsetKey("simple", "t", 0), OffsetKey("simple", "u", 0)]
    async with running(store) as again:
        assert await committed(again, "simple") == {("t", 1)}


@run_async
async def test_consumer_group_keeps_offsets_of_subscribed_topics() -> None:
    async with running() as c:
        member, gen = await single_member_group(
            c, protocols=(Protocol("range", subscription("t")),)
        )
        await c.commit_offsets(commit(GROUP, [("t", 0), ("other", 0)], gen, member))
        reply = await c.delete_offsets(delete(GROUP, ("t", 0), ("other", 0)))
        assert reply.error_code is ErrorCode.NONE
        assert [p.error_code for p in reply.partitions] == [
            ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
            ErrorCode.NONE,
        ]
        assert await committed(c, GROUP) == {("t", 0)}


@run_async
async def test_group_level_errors() -> None:
    async with running() as c:
        assert (await c.delete_offsets(delete("", ("t", 0)))).error_code is (
            ErrorCode.INVALID_GROUP_ID
        )
        missing = await c.delete_offsets(delete("missing", ("t", 0)))
        assert missing.error_code is ErrorCode.GROUP_ID_NOT_FOUND
        assert missing.partitions == ()
        await single_member_group(c, protocol_type="connect")
        busy = await c.delete_offsets(delete(GROUP, ("t", 0)))
        assert busy.error_code is ErrorCode.NON_EMPTY_GROUP


@run_async
async def test_partitions_the_broker_does_not_host_are_unknown() -> None:
    c = GroupCoordinator(
        node=NODE,
        store=MemoryOffsetsStore(),
        config=config(),
        partition_exists=lambda topic, partition: topic == "t",
    )
    await c.start()
    try:
        await c.commit_offsets(commit("simple", [("t", 0)]))
        reply = await c.delete_offsets(delete("simple", ("t", 0), ("gone", 0)))
        assert [p.error_code for p in reply.partitions] == [
            ErrorCode.NONE,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ]
    finally:
        await c.close()
