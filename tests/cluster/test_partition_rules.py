"""The replication rules of ``tierlog.replication.partition.Partition``, on a real log
(spec/kafka-replication.md §3, §5; Kafka's ``ReplicaTest`` and ``PartitionTest``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.cluster.znodes import PartitionState
from tierlog.log import LogConfig, LogManager, TopicPartition
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.replication.partition import FollowerState, Partition

LAG_MS = 10_000


def _all_eligible() -> set[int]:
    return {1, 2, 3}


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[Partition]:
    mgr = LogManager([tmp_path], LogConfig())
    mgr.load()
    plog = mgr.create_log(TopicPartition("t", 0), uuid.UUID(int=1))
    plog.set_high_watermark(0)
    p = Partition("t", 0, 1, plog)
    p.min_insync_replicas = 2
    yield p
    mgr.shutdown()


def _append(p: Partition, n: int = 1) -> int:
    batch = build_batch([SimpleRecord(b"v", None) for _ in range(n)])
    return p.log.append_as_leader(batch, p.leader_epoch).last_offset + 1


def _lead(p: Partition, epoch: int, isr: tuple[int, ...], version: int = 0) -> bool:
    return p.apply_state(PartitionState(1, epoch, isr, 1), version, (1, 2, 3), 1_000)


def test_update_fetch_state_moves_caught_up_time_as_kafka() -> None:
    """ReplicaTest.testUpdateFetchState: fetches at 5/10, 10/15, 15/15 (offset/leader LEO)
    at t1, t2, t3 move the caught-up time to t1 (previous fetch reached), then t3."""
    fs = FollowerState()
    fs.update(5, 0, 10, 100)
    assert fs.last_caught_up_ms == 0
    fs.update(10, 0, 15, 200)
    assert fs.last_caught_up_ms == 100
    fs.update(15, 0, 15, 300)
    assert fs.last_caught_up_ms == 300
    assert fs.caught_up(15, 10**9, LAG_MS), "LEO equal to the leader's is never out of sync"
    assert fs.caught_up(16, 300 + LAG_MS, LAG_MS)
    assert not fs.caught_up(16, 300 + LAG_MS + 1, LAG_MS)


def test_becoming_leader_caches_the_epoch_at_the_leo(partition: Partition) -> None:
    p = partition
    assert _lead(p, 0, (1, 2, 3))
    _append(p, 3)
    assert _lead(p, 4, (1, 2, 3), 1)
    assert p.epoch_start_offset == 3
    assert p.log.leader_epoch_cache.latest_entry() == (4, 3)
    assert not _lead(p, 4, (1, 2, 3), 1), "an equal state is a no-op"
    assert not _lead(p, 3, (1, 2, 3), 9), "an older epoch is ignored"
    assert not _lead(p, 4, (1, 2), 2), "a newer partition epoch only refreshes the ISR"
    assert p.isr == (1, 2)


def test_high_watermark_is_min_leo_over_the_isr(partition: Partition) -> None:
    p = partition
    _lead(p, 0, (1, 2, 3))
    leo = _append(p, 10)
    assert not p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible), (
        "followers' LEOs are unknown"
    )
    p.record_follower_fetch(2, 10, 0, leo, 1_000)
    assert not p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible)
    p.record_follower_fetch(3, 4, 0, leo, 1_000)
    assert (
        p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible) and p.log.high_watermark == 4
    )
    assert p.produce_outcome(4) is ErrorCode.NONE
    assert p.produce_outcome(10) is None, "acks=all keeps waiting"
    p.record_follower_fetch(3, 10, 0, leo, 1_000)
    assert (
        p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible) and p.log.high_watermark == 10
    )
    assert not p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible)


def test_caught_up_follower_outside_the_isr_holds_the_high_watermark(
    partition: Partition,
) -> None:
    """Kafka's maybeIncrementLeaderHW: with the leader alone in the ISR, a follower outside it
    that is caught up holds the HW at its LEO, so that it can reach the HW and rejoin; once it
    has lagged for replica.lag.time.max.ms it no longer does."""
    p = partition
    p.min_insync_replicas = 1
    _lead(p, 0, (1,))
    leo = _append(p, 5)
    p.record_follower_fetch(2, leo, 0, leo, 1_000)
    assert (
        p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible) and p.log.high_watermark == leo
    )
    leo2 = _append(p, 5)
    assert not p.maybe_advance_high_watermark(1_500, LAG_MS, _all_eligible), (
        "follower 2 is caught up at 5"
    )
    assert p.log.high_watermark == leo
    assert p.isr_to_expand(2, {1, 2}) == (1, 2), "its LEO reached the HW"
    p.record_follower_fetch(2, leo2 - 2, 0, leo2, 2_000)
    assert (
        p.maybe_advance_high_watermark(2_000, LAG_MS, _all_eligible)
        and p.log.high_watermark == leo2 - 2
    )
    assert p.maybe_advance_high_watermark(1_000 + LAG_MS + 1, LAG_MS, _all_eligible), (
        "lagged too long"
    )
    assert p.log.high_watermark == leo2
    assert p.followers[3].leo == -1, "follower 3 never fetched, and held nothing"


def test_a_follower_that_may_not_join_the_isr_does_not_hold_the_high_watermark(
    partition: Partition,
) -> None:
    """A broker that died (or is shutting down) and was taken out of the ISR is not waited
    for, however recently it was caught up (Kafka's isReplicaIsrEligible)."""
    p = partition
    p.min_insync_replicas = 1
    _lead(p, 0, (1,))
    leo = _append(p, 5)
    p.record_follower_fetch(2, leo, 0, leo, 1_000)
    p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible)
    leo2 = _append(p, 5)
    assert p.maybe_advance_high_watermark(1_001, LAG_MS, lambda: {1, 3})
    assert p.log.high_watermark == leo2


def test_a_follower_back_in_a_new_life_holds_nothing_until_it_fetches(
    partition: Partition,
) -> None:
    """KIP-903: a broker that restarts (or leaves) loses what its old life's fetches told the
    leader, so a follower outside the ISR that was caught up just before it stopped does not
    hold the HW at its old LEO while it starts again; ISR members keep theirs."""
    p = partition
    _lead(p, 0, (1, 2))
    leo = _append(p, 10)
    p.record_follower_fetch(2, 4, 0, leo, 1_000)
    p.record_follower_fetch(3, 6, 0, 6, 1_000)
    assert p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible)
    assert p.log.high_watermark == 4
    p.forget_followers({2, 3})
    p.record_follower_fetch(2, leo, 0, leo, 1_000)
    assert p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible)
    assert p.log.high_watermark == leo, "3's old LEO no longer counts"
    assert p.followers[3].leo == -1 and p.followers[3].last_caught_up_ms == 0
    assert p.followers[2].leo == leo, "an ISR member keeps its state"
    assert p.isr_to_expand(3, {1, 2, 3}) is None, "not caught up until it fetches again"


def test_high_watermark_frozen_below_min_isr(partition: Partition) -> None:
    """KAFKA-15583: with the committed ISR below min.insync.replicas nothing is committed;
    acks=all is refused before the append."""
    p = partition
    _lead(p, 0, (1,))
    _append(p, 2)
    assert p.check_produce(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.check_produce(1) is None
    assert (
        not p.maybe_advance_high_watermark(1_000, LAG_MS, _all_eligible)
        and p.log.high_watermark == 0
    )


def test_isr_shrinks_after_the_lag_and_expands_from_the_epoch_start(
    partition: Partition,
) -> None:
    p = partition
    _lead(p, 0, (1, 2, 3))
    leo = _append(p, 5)
    p.record_follower_fetch(2, leo, 0, leo, 1_000)
    p.record_follower_fetch(3, 2, 0, leo, 1_000)
    assert p.isr_to_shrink(1_000 + LAG_MS, LAG_MS) is None
    assert p.isr_to_shrink(1_000 + LAG_MS + 1, LAG_MS) == (1, 2)
    p.isr_written((1, 2), 1)
    p.maybe_advance_high_watermark(1_000 + LAG_MS + 1, LAG_MS, _all_eligible)
    assert p.log.high_watermark == leo
    assert p.isr_to_expand(3, {1, 2, 3}) is None, "LEO below the HW"
    p.record_follower_fetch(3, leo, 0, leo, 2_000)
    assert p.isr_to_expand(3, {1, 2}) is None, "not live"
    assert p.isr_to_expand(3, {1, 2, 3}) == (1, 2, 3)
    p.pending_isr = (1, 2, 3)
    assert p.maximal_isr == {1, 2, 3}, "a pending expansion counts at once"
    assert p.isr_to_shrink(10**9, LAG_MS) is None, "one change in flight"


def test_leader_epoch_fencing_and_demotion(partition: Partition) -> None:
    p = partition
    _lead(p, 5, (1, 2, 3))
    assert p.check_leader(5) is None and p.check_leader(-1) is None
    assert p.check_leader(4) is ErrorCode.FENCED_LEADER_EPOCH
    assert p.check_leader(6) is ErrorCode.UNKNOWN_LEADER_EPOCH
    leo = _append(p)
    assert p.apply_state(PartitionState(2, 6, (2, 3), 1), 1, (1, 2, 3), 2_000)
    assert not p.is_leader and p.check_leader(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.produce_outcome(leo) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.check_produce(1) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_new_epoch_at_or_below_the_checkpoint_asks_for_one_above_it(
    partition: Partition,
) -> None:
    """R-3/R-4: a log whose checkpoint already holds epoch 57 (a directory Apache Kafka left)
    is never led at a smaller epoch: the leader refuses produce and asks for epoch 58, and
    the checkpoint keeps its entries; once 58 arrives it is cached at the LEO."""
    p = partition
    p.log.append_as_leader(build_batch([SimpleRecord(b"k", None)] * 2), 57)
    assert p.log.leader_epoch_cache.latest_epoch() == 57
    assert _lead(p, 3, (1, 2, 3))
    assert p.epoch_bump == 58
    assert p.check_produce(1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    bumped = p.state_with_epoch_bump()
    assert bumped is not None and bumped.leader_epoch == 58 and bumped.leader == 1
    assert [(e.epoch, e.start_offset) for e in p.log.leader_epoch_cache.entries()] == [(57, 0)]
    assert _lead(p, 58, (1, 2, 3), version=1)
    assert p.epoch_bump is None and p.check_produce(1) is None
    assert [(e.epoch, e.start_offset) for e in p.log.leader_epoch_cache.entries()] == [
        (57, 0),
        (58, 2),
    ]


def test_an_assignment_change_without_a_new_epoch_tracks_added_followers(
    partition: Partition,
) -> None:
    """A reassignment adds replicas through the topic znode only: the leader tracks the new
    follower at once (so it can join the ISR) and forgets a removed one."""
    p = partition
    assert _lead(p, 0, (1, 2, 3))
    assert not p.apply_state(PartitionState(1, 0, (1, 2, 3), 1), 0, (1, 2, 3, 4), 2_000)
    assert p.replicas == (1, 2, 3, 4) and 4 in p.followers
    end = _append(p, 2)
    for r in (2, 3, 4):
        p.record_follower_fetch(r, end, 0, end, 2_100)
    assert p.isr_to_expand(4, {1, 2, 3, 4}) == (1, 2, 3, 4)
    assert not p.apply_state(PartitionState(1, 0, (1, 2, 3), 1), 0, (1, 2, 4), 2_200)
    assert 3 not in p.followers


def test_diverging_epoch_as_the_leader_computes_it(partition: Partition) -> None:
    """``AbstractFetcherThreadTest.testDivergingEpochs``' leader side: our epochs 0, 2, 5
    start at 0, 1, 2; a follower that last fetched epoch 4 at offset 3 diverged at (2, 2);
    one at epoch 2 offset 2 reads on; one at epoch 5 at our LEO reads on; an epoch we cannot
    place (below our log start) is OFFSET_OUT_OF_RANGE; -1 is never checked."""
    p = partition
    for epoch in (0, 2, 5):
        p.log.append_as_leader(build_batch([SimpleRecord(b"e", None)]), epoch)
    assert p.diverging_epoch(4, 3) == (2, 2)
    assert p.diverging_epoch(2, 2) is None
    assert p.diverging_epoch(5, 3) is None
    assert p.diverging_epoch(5, 4) == (5, 3), "past our LEO in the latest epoch"
    assert p.diverging_epoch(-1, 99) is None
    p.log.set_high_watermark(3)
    p.log.delete_records(1)
    assert p.diverging_epoch(2, 0) == ErrorCode.OFFSET_OUT_OF_RANGE
