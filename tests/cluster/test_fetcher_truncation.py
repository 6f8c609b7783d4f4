"""A follower's truncation by leader epoch (KIP-101/KIP-279/KIP-595, spec/kafka-replication.md
§4.3) on Kafka's examples: the leader's ``diverging_epoch`` check (``Partition``) answering
the follower's fetches, and ``ReplicaFetcher`` truncating on each answer, round after round
until the leader lets it read on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.replication.fetcher import FetcherSettings, Phase, ReplicaFetcher
from tierlog.replication.partition import Partition


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[tuple[PartitionLog, PartitionLog]]:
    """(follower's log, leader's log) of one partition."""
    mgr = LogManager([tmp_path], LogConfig())
    mgr.load()
    yield (
        mgr.create_log(TopicPartition("follower", 0), uuid.UUID(int=1)),
        mgr.create_log(TopicPartition("leader", 0), uuid.UUID(int=2)),
    )
    mgr.shutdown()


def _fetcher() -> ReplicaFetcher:
    settings = FetcherSettings(1, 500, 1, 1 << 20, 1 << 20, 100)
    return ReplicaFetcher(2, 0, settings, lambda: None, lambda _key: None)


def _truncate_on_fetch(follower: PartitionLog, leader: PartitionLog) -> int:
    """Fetch until the leader no longer answers ``diverging_epoch``; returns how many
    diverging answers the follower truncated on."""
    fetcher = _fetcher()
    fetcher.add("follower", 0, follower, leader_epoch=6)
    s = fetcher.partitions[("follower", 0)]
    assert s.phase is Phase.FETCHING, "a log with an epoch starts fetching (no round trip)"
    partition = Partition("leader", 0, 2, leader)
    rounds = 0
    while True:
        last = follower.leader_epoch_cache.latest_epoch()
        answer = partition.diverging_epoch(-1 if last is None else last, follower.log_end_offset)
        if answer is None:
            return rounds
        assert isinstance(answer, tuple), answer
        rounds += 1
        fetcher._apply_epoch_answer(s, *answer)
        assert s.phase is Phase.FETCHING


def _append_epochs(plog: PartitionLog, epochs: list[int]) -> None:
    for e in epochs:
        plog.append_as_leader(build_batch([SimpleRecord(b"x", None)]), e)


def test_three_round_truncation(logs: tuple[PartitionLog, PartitionLog]) -> None:
    """AbstractFetcherThreadTest.testTruncation: follower epochs 0,2,4 at offsets 0,1,2;
    leader 1,3,5: truncate to 2, then 1, then 0."""
    follower, leader = logs
    _append_epochs(follower, [0, 2, 4])
    _append_epochs(leader, [1, 3, 5])
    assert _truncate_on_fetch(follower, leader) == 3
    assert follower.log_end_offset == 0


def test_diverging_epochs(logs: tuple[PartitionLog, PartitionLog]) -> None:
    """AbstractFetcherThreadTest.testDivergingEpochs: follower 0,2,4, leader 0,2,5: the fetch
    at (3, epoch 4) is answered (2, 2), the follower truncates to 2 and reads on."""
    follower, leader = logs
    _append_epochs(follower, [0, 2, 4])
    _append_epochs(leader, [0, 2, 5])
    assert _truncate_on_fetch(follower, leader) == 1
    assert follower.log_end_offset == 2


def test_common_prefix_is_kept(logs: tuple[PartitionLog, PartitionLog]) -> None:
    """Follower 0,0,2,2 (a zombie leader of epoch 2); leader 0,0,3,3,3: the epoch-0 prefix
    stays, the epoch-2 records go."""
    follower, leader = logs
    _append_epochs(follower, [0, 0, 2, 2])
    _append_epochs(leader, [0, 0, 3, 3, 3])
    assert _truncate_on_fetch(follower, leader) == 1
    assert follower.log_end_offset == 2
    assert [e.epoch for e in follower.leader_epoch_cache.entries()] == [0]


def test_a_follower_behind_in_the_same_epoch_keeps_everything(
    logs: tuple[PartitionLog, PartitionLog],
) -> None:
    follower, leader = logs
    _append_epochs(follower, [0, 1])
    _append_epochs(leader, [0, 1, 1, 1, 1])
    assert _truncate_on_fetch(follower, leader) == 0
    assert follower.log_end_offset == 2


def test_a_follower_past_the_leaders_end_truncates_to_it(
    logs: tuple[PartitionLog, PartitionLog],
) -> None:
    """After an unclean election the new leader can be behind the follower in the epoch
    they share: the follower truncates to the leader's end (no OFFSET_OUT_OF_RANGE reset)."""
    follower, leader = logs
    _append_epochs(follower, [0, 0, 0, 0])
    _append_epochs(leader, [0, 0])
    assert _truncate_on_fetch(follower, leader) == 1
    assert follower.log_end_offset == 2


def test_a_log_without_an_epoch_starts_truncating_to_its_high_watermark(
    logs: tuple[PartitionLog, PartitionLog],
) -> None:
    follower, _ = logs
    fetcher = _fetcher()
    fetcher.add("follower", 0, follower, leader_epoch=1)
    assert fetcher.partitions[("follower", 0)].phase is Phase.TRUNCATING
