"""A follower's auxiliary state from the remote tier (spec §7.2): what the manager reads of
the segment before the leader's local start, the follower's choice of epoch for that
offset, and the follower log restarted from it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.tiered.manager.rlm_helpers import TIP, Stack, make_stack
from tierlog.log import LogConfig, PartitionLog, TopicPartition
from tierlog.log.producer_state import decode_snapshot
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.replication.aux_state import RemoteAuxState, RemoteAuxStateSource, build_aux_state
from tierlog.tiered.manager.aux_state import parse_epoch_checkpoint

PID = 4242


def _produce_idempotent(st: Stack, n: int, epoch: int, per_segment: int = 10) -> None:
    """One-record batches of one idempotent producer, rolled every ``per_segment``."""
    for _ in range(n):
        seq = st.log.log_end_offset
        st.log.append_as_leader(
            build_batch(
                [SimpleRecord(b"v%d" % seq, timestamp=1_000 + seq)],
                producer_id=PID,
                producer_epoch=0,
                base_sequence=seq,
            ),
            leader_epoch=epoch,
            required_acks=-1,
        )
        if st.log.log_end_offset % per_segment == 0:
            st.log.roll()


def _follower(root: Path) -> PartitionLog:
    return PartitionLog(
        TopicPartition(TIP.topic, TIP.partition),
        root / "follower" / f"{TIP.topic}-{TIP.partition}",
        LogConfig(index_interval_bytes=1, remote_storage_enable=True, retention_ms=-1),
        topic_id=TIP.topic_id,
        remote_enabled=True,
    )


class _Source(RemoteAuxStateSource):
    def __init__(self, st: Stack) -> None:
        self.st = st
        self.asked: list[tuple[int, int]] = []

    def aux_state(self, log: PartitionLog, epoch: int, offset: int) -> RemoteAuxState:
        self.asked.append((epoch, offset))
        got = self.st.rlm.segment_aux_state(self.st.log, epoch, offset)
        return RemoteAuxState(got.next_offset, got.epochs, got.producer_snapshot)


def test_parse_epoch_checkpoint() -> None:
    assert parse_epoch_checkpoint(b"0\n2\n0 0\n3 15\n") == [(0, 0), (3, 15)]
    with pytest.raises(ValueError):
        parse_epoch_checkpoint(b"0\n3\n0 0\n")


def test_follower_restarts_at_the_remote_segment_end_with_the_leaders_state(
    tmp_path: Path,
) -> None:
    """The leader tiered [0-9] (epoch 0) and [10-19] (epochs 0 and 2) and deleted them; its
    local log starts at 20 in epoch 2. The follower asks for the segment holding 19, and its
    log restarts at 20 with the leader's epochs below 20 and the producer's sequence at 19:
    nothing of the tiered records is copied."""
    st = make_stack(tmp_path)
    follower = _follower(tmp_path)
    try:
        _produce_idempotent(st, 15, epoch=0)
        st.log.leader_epoch_cache.assign(2, st.log.log_end_offset)
        _produce_idempotent(st, 6, epoch=2)
        st.rlm.run_now(st.tp, "copy")
        assert st.finished() == [(0, 9), (10, 19)]
        source = _Source(st)

        async def earliest_local() -> tuple[int, int]:
            return 20, 2

        async def epoch_end(epoch: int) -> tuple[int, int]:
            assert epoch == 1
            return 0, 15  # epoch 1 never had records: the answer is epoch 0's end

        start = asyncio.run(build_aux_state(follower, source, 0, earliest_local, epoch_end))
        assert start == 20
        assert source.asked == [(2, 19)]
        assert follower.local_log_start_offset == 20 == follower.log_end_offset
        assert follower.log_start_offset == 0
        assert follower.leader_epoch_cache.entries() == [(0, 0), (2, 15)]
        (entry,) = follower.producer_state.producers.values()
        assert (entry.producer_id, entry.last_seq, entry.last_offset) == (PID, 19, 19)
        snapshot = follower.producer_state.snapshot_path(20)
        assert [e.producer_id for e in decode_snapshot(snapshot.read_bytes())] == [PID]
        assert st.metric("tierlog_build_remote_log_aux_state_requests_total") == 1
        assert st.metric("tierlog_build_remote_log_aux_state_errors_total") == 0
    finally:
        follower.close()
        st.close()


def test_epoch_of_the_offset_before_the_local_start_is_the_previous_one(tmp_path: Path) -> None:
    """The leader's local log starts exactly where its epoch starts: the offset before it
    belongs to the previous epoch (OffsetForLeaderEpoch(E - 1) ends after it)."""
    st = make_stack(tmp_path)
    follower = _follower(tmp_path)
    try:
        _produce_idempotent(st, 10, epoch=0)
        st.log.leader_epoch_cache.assign(1, 10)
        _produce_idempotent(st, 1, epoch=1)
        st.rlm.run_now(st.tp, "copy")
        source = _Source(st)

        async def earliest_local() -> tuple[int, int]:
            return 10, 1

        async def epoch_end(epoch: int) -> tuple[int, int]:
            return 0, 10

        assert asyncio.run(build_aux_state(follower, source, 0, earliest_local, epoch_end)) == 10
        assert source.asked == [(0, 9)]
        assert follower.leader_epoch_cache.entries() == [(0, 0)]
    finally:
        follower.close()
        st.close()


def test_no_remote_segment_is_counted_as_an_error(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        with pytest.raises(LookupError):
            st.rlm.segment_aux_state(st.log, 0, 5)
        assert st.metric("tierlog_build_remote_log_aux_state_requests_total") == 1
        assert st.metric("tierlog_build_remote_log_aux_state_errors_total") == 1
    finally:
        st.close()
