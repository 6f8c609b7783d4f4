"""Spec §5.1 and §5.3: copy-task decisions against a real log, RSM and metadata manager."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from tests.tiered.manager.rlm_helpers import DEADLINE_S, TIP, make_stack, wait_until
from tierlog.log import PartitionLog, SegmentInfo
from tierlog.storage.directory import COPY, DELETE, DirectoryRemoteStorageManager
from tierlog.tiered.api import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from tierlog.tiered.manager import RemoteLogManager, RemoteLogManagerConfig, StopPartition
from tierlog.tiered.manager.copy_plan import candidate_segments

S = RemoteLogSegmentState


def test_sealed_segments_are_copied_with_all_artefacts(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(25, per_segment=10)  # [0-9], [10-19], active [20-24]
        st.rlm.run_now(st.tp, "copy")
        assert st.finished() == [(0, 9), (10, 19)]
        assert st.log.highest_offset_in_remote_storage == 19
        assert [(e.type, e.start_offset) for e in st.rsm.events()] == [(COPY, 0), (COPY, 10)]
        md = st.remote()[0]
        assert dict(md.segment_leader_epochs) == {0: 0}
        assert md.broker_id == 0 and md.max_timestamp_ms == 1009
        local = {s.base_offset: s for s in st.log.segments()}
        with st.rsm.fetch_log_segment(md, 0) as f:
            assert f.read() == local[0].log_path.read_bytes()
        assert md.segment_size_in_bytes == local[0].size
        with st.rsm.fetch_index(md, IndexType.LEADER_EPOCH) as f:
            assert f.read() == b"0\n1\n0 0\n"
        with st.rsm.fetch_index(md, IndexType.OFFSET) as f:
            assert f.read() == local[0].offset_index_path.read_bytes()
        assert st.metric("tierlog_remote_copy_requests_total") == 2
        assert st.metric("tierlog_remote_copy_bytes_total") == local[0].size + local[10].size
        assert st.metric("tierlog_remote_copy_errors_total") == 0
        assert st.metric("tierlog_remote_copy_lag_segments") == 0
        st.rlm.run_now(st.tp, "copy")  # nothing new
        assert len(st.rsm.events(COPY)) == 2
    finally:
        st.close()


def test_idle_rolled_segment_is_copied_when_lso_equals_active_base(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(10, per_segment=10)  # [0-9] sealed, empty active at 10 == LEO == LSO
        st.rlm.run_now(st.tp, "copy")
        assert st.finished() == [(0, 9)]
    finally:
        st.close()


def test_epoch_lineage_and_checkpoint_of_a_multi_epoch_segment(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(5, epoch=0)
        st.produce(5, epoch=3)
        st.log.roll()
        st.rlm.run_now(st.tp, "copy")
        md = st.remote()[0]
        assert dict(md.segment_leader_epochs) == {0: 0, 3: 5}
        with st.rsm.fetch_index(md, IndexType.LEADER_EPOCH) as f:
            assert f.read() == b"0\n2\n0 0\n3 5\n"
    finally:
        st.close()


def segment_info(base: int, nxt: int, *, active: bool = False) -> SegmentInfo:
    p = Path("/nonexistent")
    return SegmentInfo(base, nxt, 10, 0, p, p, p, p, active)


def test_candidates_skip_active_and_segments_past_lso() -> None:
    segs = [segment_info(5, 10), segment_info(10, 15), segment_info(15, 20, active=True)]
    assert [s.base_offset for s in candidate_segments(segs, 5, 20)] == [5, 10]
    segs = [
        segment_info(5, 10),
        segment_info(10, 15),
        segment_info(15, 20),
        segment_info(20, 25, active=True),
    ]
    assert [s.base_offset for s in candidate_segments(segs, 5, 15)] == [5, 10]
    assert [s.base_offset for s in candidate_segments(segs, 12, 25)] == [10, 15]


def test_copy_lag_holds_back_recent_segments() -> None:
    segs = [segment_info(0, 10), segment_info(10, 20), segment_info(20, 30, active=True)]
    assert candidate_segments(segs, 0, 30, now_ms=100, lag_ms=1_000, lag_bytes=1_000) == []
    got = candidate_segments(segs, 0, 30, now_ms=100, lag_ms=1_000, lag_bytes=20)
    assert [s.base_offset for s in got] == [0]  # 20 bytes follow segment 0, only 10 follow 10
    assert len(candidate_segments(segs, 0, 30, now_ms=5_000, lag_ms=1_000, lag_bytes=-1)) == 2


@pytest.mark.parametrize(
    ("fault", "segments", "rsm_failed", "retried"),
    [
        ({"fail_copy": 1}, 1, True, True),
        ({"custom_metadata_bytes": 256}, 2, False, False),
    ],
    ids=["rsm-failure-is-retried-with-a-fresh-id", "oversized-custom-metadata-cancels-the-task"],
)
def test_failed_copy_is_deleted_again_and_never_finished(
    tmp_path: Path, fault: dict[str, int], segments: int, rsm_failed: bool, retried: bool
) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(10 * segments, per_segment=10)
        st.rsm.inject_faults(**fault)
        st.rlm.run_now(st.tp, "copy")
        failed_copy, cleanup = st.rsm.events()
        assert (failed_copy.type, failed_copy.failed) == (COPY, rsm_failed)
        assert (cleanup.type, cleanup.segment_id) == (DELETE, failed_copy.segment_id)
        assert st.remote() == []  # DELETE_FINISHED is no longer listed
        assert st.log.highest_offset_in_remote_storage == -1
        assert st.metric("tierlog_remote_copy_requests_total") == 1
        assert st.metric("tierlog_remote_copy_bytes_total") == 0
        assert st.metric("tierlog_remote_copy_errors_total") == 1
        assert ("copy" in st.rlm.tasks_of(st.tp)) is retried
        assert "expiration" in st.rlm.tasks_of(st.tp)
        if retried:
            st.rlm.run_now(st.tp, "copy")
            assert st.finished() == [(0, 9)]
            assert str(st.remote()[0].remote_log_segment_id.id) != failed_copy.segment_id
    finally:
        st.close()


def test_custom_metadata_within_limit_is_stored(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(10, per_segment=10)
        st.rsm.inject_faults(custom_metadata_bytes=128)
        st.rlm.run_now(st.tp, "copy")
        md = st.remote()[0]
        assert md.state is S.COPY_SEGMENT_FINISHED
        assert md.custom_metadata is not None and len(md.custom_metadata) == 128
    finally:
        st.close()


def test_restart_recomputes_highest_offset_and_log_start_from_remote(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    st.produce(30, per_segment=10)
    st.rlm.run_now(st.tp, "copy")
    assert st.finished() == [(0, 9), (10, 19), (20, 29)]
    st.log.close()
    reopened = PartitionLog(
        st.tp, st.log.dir, st.log.config, topic_id=TIP.topic_id, remote_enabled=True
    )
    assert reopened.highest_offset_in_remote_storage == -1
    rlm2 = RemoteLogManager(
        RemoteLogManagerConfig(task_interval_ms=3_600_000, initial_task_delay_ms=3_600_000),
        st.rsm,
        st.rlmm,
        tmp_path / "logs",
    )
    try:
        rlm2.startup()
        rlm2.on_leadership_change([reopened])
        rlm2.run_now(st.tp, "copy")
        assert reopened.highest_offset_in_remote_storage == 29
        assert len(st.rsm.events(COPY)) == 3  # nothing copied twice
    finally:
        rlm2.close()
        reopened.close()
        st.rlm.close()


def test_copy_quota_blocks_between_segments_and_close_is_prompt(tmp_path: Path) -> None:
    st = make_stack(tmp_path, rlm_overrides={"copy_max_bytes_per_second": 1.0})
    try:
        st.produce(30, per_segment=10)
        worker = threading.Thread(target=st.rlm.run_now, args=(st.tp, "copy"))
        worker.start()
        wait_until(
            lambda: st.metrics.value("tierlog_remote_copy_throttle_time_ms_count") > 0,
            "copy task waiting on the quota",
        )
        assert st.finished() == [(0, 9)]
        started = time.monotonic()
        st.rlm.close()
        worker.join(5)
        assert time.monotonic() - started < 1.0
        assert not worker.is_alive()
        assert st.log.highest_offset_in_remote_storage == 9
        assert len(st.rsm.events(COPY)) == 1
        st.rlm.close()  # idempotent
    finally:
        st.close()


def test_copy_disable_removes_copy_task_and_reenable_restores_it(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        assert set(st.rlm.tasks_of(st.tp)) == {"copy", "expiration"}
        base = st.log.config
        st.log.update_config(dataclasses.replace(base, remote_log_copy_disable=True))
        st.rlm.on_config_change(st.log)
        assert set(st.rlm.tasks_of(st.tp)) == {"expiration"}
        st.log.update_config(base)
        st.rlm.on_config_change(st.log)
        assert set(st.rlm.tasks_of(st.tp)) == {"copy", "expiration"}
    finally:
        st.close()


def test_becoming_follower_swaps_tasks_and_resets_lag(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(30, per_segment=10)
        st.rlm.run_now(st.tp, "copy")
        st.metrics.copy_lag_bytes.labels(TIP.topic, str(TIP.partition)).set(1024)
        st.rlm.on_leadership_change([], [st.log])
        assert set(st.rlm.tasks_of(st.tp)) == {"follower"}
        assert st.metric("tierlog_remote_copy_lag_bytes") == 0
        st.rlm.run_now(st.tp, "follower")
        assert st.log.highest_offset_in_remote_storage == 29
        st.rlm.on_leadership_change([st.log], [])
        assert set(st.rlm.tasks_of(st.tp)) == {"copy", "expiration"}
    finally:
        st.close()


def test_leadership_change_before_startup_is_refused(tmp_path: Path) -> None:
    st = make_stack(tmp_path, lead=False)
    rlm = RemoteLogManager(RemoteLogManagerConfig(), st.rsm, st.rlmm, tmp_path / "other")
    try:
        with pytest.raises(RuntimeError):
            rlm.on_leadership_change([st.log])
    finally:
        rlm.close()
        st.close()


@pytest.mark.parametrize(
    ("delete_remote_log", "deleted", "stored"),
    [(False, [], 3), (True, [0, 10, 20], 0)],
    ids=["without-deletion-keeps-remote-data", "with-deletion-deletes-every-remote-segment"],
)
def test_stop_partition(
    tmp_path: Path, delete_remote_log: bool, deleted: list[int], stored: int
) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(30, per_segment=10)
        st.rlm.run_now(st.tp, "copy")
        st.rlm.stop_partitions([StopPartition(st.log, delete_remote_log=delete_remote_log)])
        assert st.rlm.tasks_of(st.tp) == {}
        assert sorted(e.start_offset for e in st.rsm.events(DELETE)) == deleted
        assert len(st.rsm.stored_filesets(TIP)) == stored
        assert st.metric("tierlog_remote_delete_requests_total") == len(deleted)
    finally:
        st.close()


def test_scheduled_tasks_upload_and_expire_without_manual_runs(tmp_path: Path) -> None:
    st = make_stack(tmp_path, autorun=True)
    try:
        st.produce(25, per_segment=10)
        st.rsm.wait_for(lambda evs: sum(e.type == COPY for e in evs) == 2, timeout_s=20)
        wait_until(lambda: st.log.highest_offset_in_remote_storage == 19, "highest offset")
        st.log.update_config(dataclasses.replace(st.log.config, retention_ms=1))
        st.rsm.wait_for(lambda evs: sum(e.type == DELETE for e in evs) == 2, timeout_s=20)
        wait_until(lambda: st.log.log_start_offset == 20, "log start moved by expiration")
    finally:
        st.close()


def test_a_new_leader_epoch_restarts_the_tasks_and_resets_lag(tmp_path: Path) -> None:
    """Cluster mode: every leadership change (``restart``) cancels the partition's tasks and
    starts new ones, which wait for a run of their predecessors still in flight; the copy
    lag starts again at 0."""
    st = make_stack(tmp_path)
    try:
        old = st.rlm.tasks_of(st.tp)
        st.metrics.copy_lag_bytes.labels(TIP.topic, str(TIP.partition)).set(1024)
        old["copy"].idle.clear()  # a run of the old copy task is in flight
        st.rlm.on_leadership_change([st.log], restart=True)
        new = st.rlm.tasks_of(st.tp)
        assert set(new) == {"copy", "expiration"}
        assert all(old[k].is_cancelled() and new[k] is not old[k] for k in new)
        assert st.metric("tierlog_remote_copy_lag_bytes") == 0
        st.produce(20, per_segment=10)
        new["copy"].run_once()
        assert st.finished() == [], "the new copy task waits for the old one's run"
        old["copy"].idle.set()
        new["copy"].run_once()
        assert st.finished() == [(0, 9), (10, 19)]
    finally:
        st.close()


class _HeldCopies(DirectoryRemoteStorageManager):
    """Copies wait for ``release`` after ``copying`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.copying = threading.Event()
        self.release = threading.Event()

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> CustomMetadata | None:
        self.copying.set()
        assert self.release.wait(DEADLINE_S)
        return super().copy_log_segment_data(metadata, data)


def test_a_copy_in_flight_when_leadership_moves_is_undone(tmp_path: Path) -> None:
    """The broker stops leading while a segment is in the RSM: the copy is deleted again
    instead of reaching COPY_SEGMENT_FINISHED (the new leader uploads those offsets)."""
    rsm = _HeldCopies()
    st = make_stack(tmp_path, rsm=rsm)
    try:
        st.produce(11, per_segment=10)
        copy = threading.Thread(target=st.rlm.run_now, args=(st.tp, "copy"))
        copy.start()
        assert rsm.copying.wait(DEADLINE_S)
        st.rlm.on_leadership_change([], [st.log], restart=True)
        rsm.release.set()
        copy.join(DEADLINE_S)
        assert st.finished() == []
        assert [e.start_offset for e in rsm.events(DELETE)] == [0]
        assert st.log.highest_offset_in_remote_storage == -1
    finally:
        rsm.release.set()
        st.close()
