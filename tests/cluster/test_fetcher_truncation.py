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
        assert rounds <= 10, f"the leader keeps answering {answer}: the follower never reads"
        fetcher._apply_epoch_answer(s, *answer)
        assert s.phase is Phase.FETCHING


def _append_epochs(plog: PartitionLog, epochs: list[int]) -> None:
    for e in epochs:
        plog.append_as_leader(build_batch([SimpleRecord(b"x", None)]), e)


@pytest.mark.parametrize(
    ("follower_epochs", "leader_epochs", "rounds", "kept"),
    [
        # AbstractFetcherThreadTest.testTruncation: truncate to 2, then 1, then 0
        pytest.param([0, 2, 4], [1, 3, 5], 3, [], id="kafka-testTruncation"),
        # AbstractFetcherThreadTest.testDivergingEpochs: (3, epoch 4) answered (2, 2)
        pytest.param([0, 2, 4], [0, 2, 5], 1, [0, 2], id="kafka-testDivergingEpochs"),
        # a zombie leader of epoch 2: the epoch-0 prefix stays, the epoch-2 records go
        pytest.param([0, 0, 2, 2], [0, 0, 3, 3, 3], 1, [0, 0], id="common-prefix-kept"),
        pytest.param([0, 1], [0, 1, 1, 1, 1], 0, [0, 1], id="behind-in-the-same-epoch"),
        # after an unclean election the new leader can be behind in the epoch they share:
        # truncate to its end (no OFFSET_OUT_OF_RANGE reset)
        pytest.param([0, 0, 0, 0], [0, 0], 1, [0, 0], id="past-the-leaders-end"),
    ],
)
def test_truncation_on_fetch_keeps_the_common_prefix(
    logs: tuple[PartitionLog, PartitionLog],
    follower_epochs: list[int],
    leader_epochs: list[int],
    rounds: int,
    kept: list[int],
) -> None:
    """The follower truncates on as many diverging answers as Kafka's examples take, and
    keeps exactly the records (by epoch) its log shares with the leader's."""
    follower, leader = logs
    _append_epochs(follower, follower_epochs)
    _append_epochs(leader, leader_epochs)
    assert _truncate_on_fetch(follower, leader) == rounds
    assert follower.log_end_offset == len(kept)
    assert [e.epoch for e in follower.leader_epoch_cache.entries()] == sorted(set(kept))


def test_an_epoch_led_without_records_is_dropped_and_the_follower_reads_on(
    logs: tuple[PartitionLog, PartitionLog],
) -> None:
    """Kafka's ``truncateTo`` case: the follower led epoch 1 and was replaced before it
    appended anything, so its cache ends with (1, LEO) that the new leader never saw. The
    divergence is at its LEO; truncating there must still drop that entry, or every later
    Fetch carries epoch 1 and gets the same answer (the follower never rejoins the ISR)."""
    follower, leader = logs
    _append_epochs(follower, [0, 0])
    follower.leader_epoch_cache.assign(1, follower.log_end_offset)
    _append_epochs(leader, [0, 0, 2, 2])
    assert _truncate_on_fetch(follower, leader) == 1
    assert follower.log_end_offset == 2
    assert [e.epoch for e in follower.leader_epoch_cache.entries()] == [0]


def test_a_log_without_an_epoch_starts_truncating_to_its_high_watermark(
    logs: tuple[PartitionLog, PartitionLog],
) -> None:
    follower, _ = logs
    fetcher = _fetcher()
    fetcher.add("follower", 0, follower, leader_epoch=1)
    assert fetcher.partitions[("follower", 0)].phase is Phase.TRUNCATING
