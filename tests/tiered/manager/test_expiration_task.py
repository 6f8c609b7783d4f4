"""Spec §5.2 against the real stack: remote retention by size, time and log start offset."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.tiered.manager.rlm_helpers import TIP, Stack, make_stack, wait_until
from tierlog.storage.directory import DELETE
from tierlog.tiered.api import RemoteLogSegmentState
from tierlog.tiered.manager import StopPartition

S = RemoteLogSegmentState


def reconfigure(st: Stack, **changes: Any) -> None:
    st.log.update_config(dataclasses.replace(st.log.config, **changes))


def uploaded(tmp_path: Path, n_segments: int = 3) -> Stack:
    st = make_stack(tmp_path)
    st.produce(10 * n_segments + 5, per_segment=10)
    st.rlm.run_now(st.tp, "copy")
    assert len(st.finished()) == n_segments
    return st


def test_size_breach_deletes_oldest_and_moves_log_start_first(tmp_path: Path) -> None:
    st = uploaded(tmp_path)
    try:
        sizes = {s.base_offset: s.size for s in st.log.segments()}
        local_only = sizes[30]  # the active segment holds the only not-uploaded data
        reconfigure(st, retention_bytes=local_only + sizes[20])
        st.rlm.run_now(st.tp, "expiration")
        assert [e.start_offset for e in st.rsm.events(DELETE)] == [0, 10]
        assert st.finished() == [(20, 29)]
        assert st.log.log_start_offset == 20
        assert st.metric("tierlog_remote_delete_requests_total") == 2
        assert st.metric("tierlog_remote_log_metadata_count") == 3  # counted before deleting
    finally:
        st.close()


def test_time_breach_is_inclusive(tmp_path: Path) -> None:
    st = uploaded(tmp_path)
    try:
        reconfigure(st, retention_ms=1)  # every record has a 1970 timestamp
        st.rlm.run_now(st.tp, "expiration")
        assert sorted(e.start_offset for e in st.rsm.events(DELETE)) == [0, 10, 20]
        assert st.log.log_start_offset == 30
        assert st.remote() == []
    finally:
        st.close()


def test_delete_records_breach_removes_without_moving_start_further(tmp_path: Path) -> None:
    st = uploaded(tmp_path)
    try:
        st.log.delete_records(15)
        st.rlm.run_now(st.tp, "expiration")
        assert [e.start_offset for e in st.rsm.events(DELETE)] == [0]
        assert st.log.log_start_offset == 15
        assert st.finished() == [(10, 19), (20, 29)]
    finally:
        st.close()


def test_failed_delete_moves_start_then_retries_next_run(tmp_path: Path) -> None:
    st = uploaded(tmp_path, 1)
    try:
        reconfigure(st, retention_bytes=0)
        st.rsm.inject_faults(fail_delete=1)
        st.rlm.run_now(st.tp, "expiration")
        assert st.log.log_start_offset == 10
        assert st.metric("tierlog_remote_delete_errors_total") == 1
        assert [s.state for s in st.remote()] == [S.DELETE_SEGMENT_STARTED]
        st.rlm.run_now(st.tp, "expiration")  # retries the dangling DELETE_STARTED
        assert [e.failed for e in st.rsm.events(DELETE)] == [True, False]
        assert st.remote() == []
        assert st.metric("tierlog_remote_delete_requests_total") == 2
    finally:
        st.close()


def test_nothing_to_delete_without_breach(tmp_path: Path) -> None:
    st = uploaded(tmp_path)
    try:
        st.rlm.run_now(st.tp, "expiration")
        assert st.rsm.events(DELETE) == []
        assert st.log.log_start_offset == 0
        sizes = sum(s.segment_size_in_bytes for s in st.remote())
        assert st.metric("tierlog_remote_log_size_bytes") == sizes
    finally:
        st.close()


def test_copy_disabled_keeps_expiring(tmp_path: Path) -> None:
    st = uploaded(tmp_path)
    try:
        reconfigure(st, remote_log_copy_disable=True, retention_ms=1)
        st.rlm.on_config_change(st.log)
        assert set(st.rlm.tasks_of(st.tp)) == {"expiration"}
        st.rlm.run_now(st.tp, "expiration")
        assert len(st.rsm.events(DELETE)) == 3
    finally:
        st.close()


def test_disable_remote_with_delete_raises_log_start_to_local_start(tmp_path: Path) -> None:
    st = uploaded(tmp_path)
    try:
        reconfigure(st, local_retention_bytes=1)
        st.log.run_retention()
        assert st.log.local_log_start_offset == 30
        reconfigure(st, remote_storage_enable=False, remote_log_delete_on_disable=True)
        st.log.remote_enabled = False
        st.rlm.disable_remote(st.log)
        assert sorted(e.start_offset for e in st.rsm.events(DELETE)) == [0, 10, 20]
        assert st.log.log_start_offset == 30
        assert st.rlm.tasks_of(st.tp) == {}
    finally:
        st.close()


def restart(st: Stack) -> Stack:
    """The broker restarts: the log is reopened from disk (no log-start checkpoint is kept
    by a bare PartitionLog: the case of a lost or not-yet-written one) and the metadata is
    replayed from the same topic."""
    cfg = st.log.config
    st.close()
    return make_stack(st.root, log_config=cfg, topic_io=st.topic_io)


def test_first_expiration_after_a_restart_keeps_remote_data_within_retention(
    tmp_path: Path,
) -> None:
    st = uploaded(tmp_path)
    sizes = {s.base_offset: s.size for s in st.log.segments()}
    reconfigure(st, retention_bytes=sum(sizes.values()))  # exactly what is kept: no breach
    st.rlm.run_now(st.tp, "expiration")
    assert st.rsm.events(DELETE) == []
    st = restart(st)
    try:
        # both tasks start together after a restart; expiration may run before any copy
        st.rlm.run_now(st.tp, "expiration")
        assert st.rsm.events(DELETE) == []
        assert st.finished() == [(0, 9), (10, 19), (20, 29)]
        assert st.log.log_start_offset == 0
    finally:
        st.close()


def tiered_away(tmp_path: Path) -> Stack:
    """Three segments uploaded and deleted locally: offsets 0-29 exist only remotely."""
    st = uploaded(tmp_path)
    reconfigure(st, local_retention_bytes=1)
    st.log.run_retention()
    assert st.log.local_log_start_offset == 30
    return st


def test_restart_without_a_log_start_checkpoint_keeps_the_remote_tier(tmp_path: Path) -> None:
    st = restart(tiered_away(tmp_path))
    try:
        assert st.log.log_start_offset == 0  # not the first local offset
        for task in ("copy", "expiration", "copy", "expiration"):
            st.rlm.run_now(st.tp, task)
        assert st.rsm.events(DELETE) == []
        assert st.finished() == [(0, 9), (10, 19), (20, 29)]
        assert st.log.log_start_offset == 0
    finally:
        st.close()


def test_restart_with_a_corrupt_leader_epoch_checkpoint_keeps_the_remote_tier(
    tmp_path: Path,
) -> None:
    st = tiered_away(tmp_path)
    checkpoint = st.log.dir / "leader-epoch-checkpoint"
    st.close()
    checkpoint.write_bytes(b"garbage\n")
    st = make_stack(st.root, log_config=st.log.config, topic_io=st.topic_io)
    try:
        for task in ("copy", "expiration"):
            st.rlm.run_now(st.tp, task)
        st.produce(5, per_segment=10)  # a new leader-epoch entry at the local end
        for task in ("copy", "expiration", "copy", "expiration"):
            st.rlm.run_now(st.tp, task)
        assert st.rsm.events(DELETE) == []
        assert st.finished()[:3] == [(0, 9), (10, 19), (20, 29)]
        assert st.log.log_start_offset == 0
    finally:
        st.close()


def test_tiering_turned_off_then_on_again_tiers_the_partition_again(tmp_path: Path) -> None:
    st = uploaded(tmp_path)
    try:
        reconfigure(st, remote_storage_enable=False, remote_log_delete_on_disable=True)
        st.log.remote_enabled = False
        st.rlm.disable_remote(st.log)
        assert st.remote() == []
        reconfigure(st, remote_storage_enable=True, remote_log_delete_on_disable=False)
        st.log.remote_enabled = True
        st.rlm.on_config_change(st.log)
        wait_until(lambda: st.rlmm.is_ready(TIP), "metadata ready again")
        st.produce(20, per_segment=10)
        st.rlm.run_now(st.tp, "copy")
        tiered_again = st.remote()
        assert tiered_again and tiered_again[0].start_offset == 30
    finally:
        st.close()


def test_a_failed_remote_delete_still_stops_the_partition_and_reports_the_error(
    tmp_path: Path,
) -> None:
    st = uploaded(tmp_path)
    try:
        st.rsm.inject_faults(fail_delete=1)
        with pytest.raises(Exception, match="delete"):
            st.rlm.stop_partitions([StopPartition(st.log, delete_remote_log=True)])
        assert st.rlm.tasks_of(st.tp) == {}
    finally:
        st.close()


def test_deleting_after_a_plain_stop_still_deletes_the_remote_data(tmp_path: Path) -> None:
    """A topic's deletion races its replica's own stop: the stop can release the partition
    and its metadata in the RLMM first. The deletion still finds the segments (the metadata
    is loaded again for it) and deletes them, instead of failing and leaving them behind."""
    st = uploaded(tmp_path)
    try:
        before = st.remote()
        assert before
        st.rlm.stop_partitions([StopPartition(st.log)])
        wait_until(lambda: not st.rlmm.is_ready(TIP), "the metadata released")
        st.rlm.stop_partitions([StopPartition(st.log, delete_remote_log=True)])
        deleted = sorted(e.start_offset for e in st.rsm.events(DELETE) if not e.failed)
        assert deleted == [s.start_offset for s in before]
        wait_until(lambda: not st.rlmm.is_ready(TIP), "the metadata released after the deletion")
    finally:
        st.close()
