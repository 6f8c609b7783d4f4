"""``__consumer_offsets`` compacted by the log cleaner: the coordinator's load after a
restart reads the live state, not the history, and tombstones delete while loading."""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

from tests.server.group.group_helpers import NODE, config, run_async
from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.log.cleaner.cleaner import Cleaner
from tierlog.log.cleaner.config import CleanerConfig
from tierlog.log.cleaner.offset_map import OffsetMap
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import Compression, SimpleRecord, build_batch, scan_batches
from tierlog.server.group import OFFSETS_TOPIC, GroupCoordinator, partition_for
from tierlog.server.group.log_store import LogOffsetsStore
from tierlog.server.group.model import (
    DeleteGroupsRequest,
    ListGroupsRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
)
from tierlog.server.group.model import (
    TopicPartition as GroupTopicPartition,
)
from tierlog.server.group.schema import (
    CommittedOffset,
    GroupKey,
    OffsetKey,
    decode_key,
    offset_key,
    offset_value,
)

PARTITIONS = 2
TOPIC_ID = uuid.UUID(int=15)
# What groups_wiring gives the topic, with test-sized segments and no tombstone delay.
COMPACTED = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=64 * 1024,
    delete_retention_ms=0,
    min_cleanable_dirty_ratio=0.01,
)


class Broker:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.manager = LogManager([log_dir], LogConfig())
        self.manager.load()
        self.store = LogOffsetsStore(self.log_for, PARTITIONS)

    def log_for(self, partition: int) -> PartitionLog:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        existing = self.manager.get_log(tp)
        return existing or self.manager.create_log(tp, TOPIC_ID, COMPACTED)

    async def coordinator(self) -> GroupCoordinator:
        c = GroupCoordinator(
            node=NODE, store=self.store, config=config(offsets_topic_num_partitions=PARTITIONS)
        )
        await c.start()
        return c

    def clean(self) -> None:
        """Roll the active segments (never cleaned) and clean until nothing is left."""
        for p in range(PARTITIONS):
            self.log_for(p).roll()
        cleaner = self.manager.start_cleaner(CleanerConfig(enable=False))
        worker = Cleaner(OffsetMap(1 << 22, 0.9))
        now = int(time.time() * 1000) + 1
        for _ in range(50):
            if not cleaner.clean_once(worker, now):
                break

    def close(self) -> None:
        self.manager.shutdown()


def _commits(group_id: str, count: int, per_batch: int = 500) -> list[bytes]:
    """``count`` commits of one partition, as the coordinator writes them, batched."""
    now = int(time.time() * 1000)
    key = offset_key(group_id, GroupTopicPartition("events", 0))
    batches = []
    for start in range(0, count, per_batch):
        recs = [
            SimpleRecord(offset_value(CommittedOffset(i, 0, "", now)), key, now)
            for i in range(start, min(start + per_batch, count))
        ]
        batches.append(build_batch(recs, timestamp=now))
    return batches


async def _fetched(c: GroupCoordinator, group_id: str) -> dict[tuple[str, int], int]:
    reply = await c.fetch_offsets(
        OffsetFetchRequest(groups=(OffsetFetchGroup(group_id=group_id, partitions=None),))
    )
    return {(p.topic, p.partition): p.offset for p in reply.groups[0].partitions}


def _commit(group_id: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=-1,
        member_id="",
        partitions=(
            OffsetCommitPartition(topic="events", partition=0, offset=offset),
            OffsetCommitPartition(topic="events", partition=1, offset=offset),
        ),
    )


@run_async
async def test_load_after_cleaning_reads_the_live_state_not_the_history(tmp_path: Path) -> None:
    commits = 100_000
    broker = Broker(tmp_path)
    hot = broker.log_for(partition_for("hot", PARTITIONS))
    for batch in _commits("hot", commits):
        hot.append_as_leader(batch, 0, -1)
    c = await broker.coordinator()
    assert broker.store.last_load is not None
    assert broker.store.last_load.records == commits  # uncleaned: the whole history
    assert await _fetched(c, "hot") == {("events", 0): commits - 1}
    await c.commit_offsets(_commit("doomed", 7))
    await c.commit_offsets(_commit("trimmed", 3))
    assert (await c.delete_groups(DeleteGroupsRequest(group_ids=("doomed",)))).results[
        0
    ].error_code is ErrorCode.NONE
    trimmed = await c.delete_offsets(
        OffsetDeleteRequest(group_id="trimmed", partitions=(GroupTopicPartition("events", 1),))
    )
    assert [p.error_code for p in trimmed.partitions] == [ErrorCode.NONE]
    await c.close()
    broker.clean()
    broker.close()

    restarted = Broker(tmp_path)
    c2 = await restarted.coordinator()
    try:
        stats = restarted.store.last_load
        assert stats is not None
        # one live offset for "hot", one for "trimmed", and tombstones cleaned away
        assert stats.records <= 10, stats
        assert await _fetched(c2, "hot") == {("events", 0): commits - 1}
        assert await _fetched(c2, "trimmed") == {("events", 0): 3}
        assert await _fetched(c2, "doomed") == {}
    finally:
        await c2.close()
        restarted.close()


@run_async
async def test_tombstones_delete_while_loading_before_any_cleaning(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    c = await broker.coordinator()
    await c.commit_offsets(_commit("gone", 1))
    await c.commit_offsets(_commit("kept", 2))
    await c.delete_groups(DeleteGroupsRequest(group_ids=("gone",)))
    await c.close()
    broker.close()

    restarted = Broker(tmp_path)
    c2 = await restarted.coordinator()
    try:
        assert await _fetched(c2, "gone") == {}
        assert await _fetched(c2, "kept") == {("events", 0): 2, ("events", 1): 2}
        listed = await c2.list_groups(ListGroupsRequest())
        assert {g.group_id for g in listed.groups} == {"kept"}
    finally:
        await c2.close()
        restarted.close()


@run_async
async def test_offsets_topic_compression_codec_is_written_and_loaded(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    broker.store = LogOffsetsStore(broker.log_for, PARTITIONS, compression=Compression.GZIP)
    c = await broker.coordinator()
    await c.commit_offsets(_commit("zipped", 9))
    await c.close()
    plog = broker.log_for(partition_for("zipped", PARTITIONS))
    data = plog.read(0, 1 << 20).to_bytes()
    assert [h.compression for h in scan_batches(data)] == [Compression.GZIP]
    broker.close()

    restarted = Broker(tmp_path)
    c2 = await restarted.coordinator()
    try:
        assert await _fetched(c2, "zipped") == {("events", 0): 9, ("events", 1): 9}
    finally:
        await c2.close()
        restarted.close()


async def _state(c: GroupCoordinator, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    return {g: await _fetched(c, g) for g in groups}


@run_async
async def test_cleaned_log_loads_the_same_state_as_the_whole_history(tmp_path: Path) -> None:
    """Random commits, OffsetDeletes and DeleteGroups over a few groups; after cleaning
    (tombstones included, delete.retention.ms=0) a restart sees exactly what was live."""
    rng = random.Random(15)
    groups = [f"g{i}" for i in range(5)]
    broker = Broker(tmp_path)
    c = await broker.coordinator()
    for step in range(600):
        group = rng.choice(groups)
        roll = rng.random()
        if roll < 0.75:
            parts = rng.sample(range(3), rng.randint(1, 3))
            await c.commit_offsets(
                OffsetCommitRequest(
                    group_id=group,
                    generation_id=-1,
                    member_id="",
                    partitions=tuple(
                        OffsetCommitPartition(topic="events", partition=p, offset=step)
                        for p in parts
                    ),
                )
            )
        elif roll < 0.9:
            await c.delete_offsets(
                OffsetDeleteRequest(
                    group_id=group,
                    partitions=(GroupTopicPartition("events", rng.randrange(3)),),
                )
            )
        else:
            await c.delete_groups(DeleteGroupsRequest(group_ids=(group,)))
        if step % 150 == 149:
            for p in range(PARTITIONS):
                broker.log_for(p).roll()
    expected = await _state(c, groups)
    live_groups = {g.group_id for g in (await c.list_groups(ListGroupsRequest())).groups}
    await c.close()
    written = sum(broker.log_for(p).log_end_offset for p in range(PARTITIONS))
    broker.clean()
    broker.close()

    restarted = Broker(tmp_path)
    c2 = await restarted.coordinator()
    try:
        assert await _state(c2, groups) == expected
        listed = {g.group_id for g in (await c2.list_groups(ListGroupsRequest())).groups}
        assert listed == live_groups
        stats = restarted.store.last_load
        assert stats is not None
        # at most one record per key ever written (a live value, or a tombstone that stays
        # until the cleaning after the one that reached it: KIP-534's delete horizon)
        distinct_keys = len(groups) * 3 + len(groups)
        live_keys = sum(len(v) for v in expected.values())
        assert live_keys <= stats.records <= distinct_keys < written
    finally:
        await c2.close()
        restarted.close()


@run_async
async def test_offset_expiry_writes_tombstones_for_offsets_and_group(tmp_path: Path) -> None:
    now = [int(time.time() * 1000)]
    broker = Broker(tmp_path)
    c = GroupCoordinator(
        node=NODE,
        store=broker.store,
        config=config(offsets_topic_num_partitions=PARTITIONS, offsets_retention_ms=1000),
        clock_ms=lambda: now[0],
    )
    await c.start()
    await c.commit_offsets(_commit("aging", 4))
    now[0] += 1000
    assert await c.expire_offsets() == 2
    await c.close()
    records = await broker.store.load()
    tombstones = {decode_key(k) for k, v in records if v is None}
    assert tombstones == {
        OffsetKey("aging", "events", 0),
        OffsetKey("aging", "events", 1),
        GroupKey("aging"),
    }
    broker.clean()
    broker.close()

    restarted = Broker(tmp_path)
    c2 = await restarted.coordinator()
    try:
        assert await _fetched(c2, "aging") == {}
        assert (await c2.list_groups(ListGroupsRequest())).groups == ()
    finally:
        await c2.close()
        restarted.close()
