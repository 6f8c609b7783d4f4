"""A follower's truncation by leader epoch (KIP-101/KIP-279, spec/kafka-replication.md §4.3)
as ``ReplicaFetcher`` applies OffsetForLeaderEpoch answers, on Kafka's examples."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.log.leader_epoch import EpochEntry, LeaderEpochCache
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.replication.fetcher import FetcherSettings, FetchState, Phase, ReplicaFetcher


@pytest.fixture
def follower_log(tmp_path: Path) -> Iterator[PartitionLog]:
    mgr = LogManager([tmp_path], LogConfig())
    mgr.load()
    yield mgr.create_log(TopicPartition("t", 0), uuid.UUID(int=1))
    mgr.shutdown()


def _fetcher() -> ReplicaFetcher:
    settings = FetcherSettings(1, 500, 1, 1 << 20, 1 << 20, 100)
    return ReplicaFetcher(2, 0, settings, lambda: None, lambda _key: None)


def _truncate_against(plog: PartitionLog, leader: LeaderEpochCache, leader_leo: int) -> int:
    """Run OffsetForLeaderEpoch rounds until the state is fetching; returns the rounds."""
    fetcher = _fetcher()
    s = FetchState("t", 0, plog, leader_epoch=6)
    rounds = 0
    while s.phase is Phase.TRUNCATING:
        rounds += 1
        asked = plog.leader_epoch_cache.latest_epoch()
        assert asked is not None
        fetcher._apply_epoch_answer(s, *leader.end_offset_for(asked, leader_leo))
    return rounds


def _append_epochs(plog: PartitionLog, epochs: list[int]) -> None:
    for e in epochs:
        plog.append_as_leader(build_batch([SimpleRecord(b"x", None)]), e)


def test_three_round_truncation(follower_log: PartitionLog) -> None:
    """AbstractFetcherThreadTest.testTruncation: follower epochs 0,2,4 at offsets 0,1,2;
    leader 1,3,5: truncate to 2, then 1, then 0."""
    _append_epochs(follower_log, [0, 2, 4])
    leader = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(3, 1), EpochEntry(5, 2)])
    assert _truncate_against(follower_log, leader, 3) == 3
    assert follower_log.log_end_offset == 0


def test_common_prefix_is_kept(follower_log: PartitionLog) -> None:
    """Follower 0,0,2,2 (a zombie leader of epoch 2); leader 0,0,3: the epoch-0 prefix
    stays, the epoch-2 records go."""
    _append_epochs(follower_log, [0, 0, 2, 2])
    leader = LeaderEpochCache(None, [EpochEntry(0, 0), EpochEntry(3, 2)])
    assert _truncate_against(follower_log, leader, 5) == 1
    assert follower_log.log_end_offset == 2
    assert follower_log.leader_epoch_cache.entries() == [EpochEntry(0, 0)]


def test_a_follower_behind_in_the_same_epoch_keeps_everything(
    follower_log: PartitionLog,
) -> None:
    _append_epochs(follower_log, [0, 1])
    leader = LeaderEpochCache(None, [EpochEntry(0, 0), EpochEntry(1, 1)])
    assert _truncate_against(follower_log, leader, 9) == 1
    assert follower_log.log_end_offset == 2
