"""The log-backed OffsetsStore against a real LogManager in a temp dir, across restarts."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.server.group.group_helpers import (
    GROUP,
    NODE,
    config,
    heartbeat,
    run_async,
    single_member_group,
)
from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group import OFFSETS_TOPIC, GroupCoordinator, partition_for
from tierlog.server.group.log_store import LogOffsetsStore
from tierlog.server.group.model import (
    DeleteGroupsRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
)
from tierlog.server.group.model import TopicPartition as GroupTopicPartition
from tierlog.server.group.schema import OffsetKey, decode_key, decode_offset_value, offset_key

PARTITIONS = 4
TOPIC_ID = uuid.UUID(int=7)
# Offsets must never age out of the log by time or size.
OFFSETS_LOG_CONFIG = LogConfig(retention_ms=-1, retention_bytes=-1)


class Broker:
    """Just enough of a broker: a LogManager and the __consumer_offsets partitions."""

    def __init__(self, log_dir: Path) -> None:
        self.manager = LogManager([log_dir], LogConfig())
        self.manager.load()

    def log_for(self, partition: int) -> PartitionLog:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        existing = self.manager.get_log(tp)
        return existing or self.manager.create_log(tp, TOPIC_ID, OFFSETS_LOG_CONFIG)

    async def coordinator(self) -> GroupCoordinator:
        store = LogOffsetsStore(self.log_for, PARTITIONS)
        c = GroupCoordinator(
            node=NODE, store=store, config=config(offsets_topic_num_partitions=PARTITIONS)
        )
        await c.start()
        return c


def commit(
    group_id: str, offset: int, generation: int = -1, member_id: str = ""
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        partitions=(
            OffsetCommitPartition(topic="events", partition=0, offset=offset, metadata="md"),
            OffsetCommitPartition(topic="events", partition=1, offset=offset + 1),
        ),
    )


async def fetched(c: GroupCoordinator, group_id: str) -> dict[tuple[str, int], tuple[int, str]]:
    reply = await c.fetch_offsets(
        OffsetFetchRequest(groups=(OffsetFetchGroup(group_id=group_id, partitions=None),))
    )
    return {(p.topic, p.partition): (p.offset, p.metadata) for p in reply.groups[0].partitions}


@run_async
async def test_committed_offsets_survive_broker_restart(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    c = await broker.coordinator()
    member, generation = await single_member_group(c)
    assert [
        r.error_code
        for r in (await c.commit_offsets(commit(GROUP, 10, generation, member))).partitions
    ] == [ErrorCode.NONE] * 2
    await c.commit_offsets(commit(GROUP, 20, generation, member))
    await c.commit_offsets(commit("simple", 5))
    await c.commit_offsets(commit("deleted", 1))
    await c.delete_groups(DeleteGroupsRequest(group_ids=("deleted",)))
    await c.close()
    broker.manager.shutdown()

    restarted = Broker(tmp_path)
    c2 = await restarted.coordinator()
    assert await fetched(c2, GROUP) == {("events", 0): (20, "md"), ("events", 1): (21, "")}
    assert await fetched(c2, "simple") == {("events", 0): (5, "md"), ("events", 1): (6, "")}
    assert await fetched(c2, "deleted") == {}
    assert await heartbeat(c2, member, generation) is ErrorCode.NONE
    await c2.close()
    restarted.manager.shutdown()


@run_async
async def test_records_land_in_kafka_format_on_the_group_partition(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    c = await broker.coordinator()
    await c.commit_offsets(commit("simple", 5))
    await c.close()
    log = broker.log_for(partition_for("simple", PARTITIONS))
    store_view = LogOffsetsStore(broker.log_for, PARTITIONS)
    records = await store_view.load()
    assert len(records) == 2
    assert decode_key(records[0][0]) == OffsetKey("simple", "events", 0)
    assert records[0][1] is not None
    assert decode_offset_value(records[0][1]).offset == 5
    assert log.log_end_offset == 2  # one batch, two records
    broker.manager.shutdown()


@run_async
async def test_a_partition_load_reports_open_transactions_and_where_it_stopped(
    tmp_path: Path,
) -> None:
    broker = Broker(tmp_path)
    store = LogOffsetsStore(broker.log_for, PARTITIONS)
    partition = partition_for("txn", PARTITIONS)
    key = offset_key("txn", GroupTopicPartition("events", 0))
    await store.append(partition, [(key, b"v")], 1, producer=(9, 0))
    opened = await store.load_partition(partition)
    assert (opened.records, opened.pending, opened.end_offset) == ([], {9: [(key, b"v")]}, 1)
    broker.log_for(partition).append_txn_marker(9, 0, 0, committed=True, leader_epoch=0)
    closed = await store.load_partition(partition)
    assert (closed.records, closed.pending, closed.end_offset) == ([(key, b"v")], {}, 2)
    broker.manager.shutdown()
