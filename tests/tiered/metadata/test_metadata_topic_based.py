"""Topic-based RLMM over the in-memory topic: read-your-writes, replay, readiness,
restart (full replay and snapshot + tail), waits during replay, §5.5 examples 55/57/58."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.tiered.metadata.metadata_factories import segment, update
from tests.tiered.metadata.rlmm_harness import (
    TIPS,
    GatedTopicIO,
    make_rlmm,
    populate,
    state,
    wait_until,
)
from tierlog.tiered.api import (
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    ReplicaNotAvailableException,
    RetriableRemoteStorageException,
    TopicIdPartition,
)
from tierlog.tiered.metadata import (
    InMemoryMetadataTopicIO,
    RemoteLogMetadataInitializationError,
    RemoteLogMetadataTopicPartitioner,
    TopicBasedRemoteLogMetadataManager,
    serialize,
)
from tierlog.tiered.metadata.snapshot_file import snapshot_path

S = RemoteLogSegmentState
P = RemotePartitionDeleteState


@pytest.fixture
def managers() -> Iterator[list[TopicBasedRemoteLogMetadataManager]]:
    made: list[TopicBasedRemoteLogMetadataManager] = []
    yield made
    for m in made:
        m.close()


def start(
    managers: list[TopicBasedRemoteLogMetadataManager],
    io: InMemoryMetadataTopicIO,
    snapshot_dir: Path | None,
    tips: list[TopicIdPartition] = TIPS,
    extra: dict[str, str] | None = None,
) -> TopicBasedRemoteLogMetadataManager:
    rlmm = make_rlmm(io, snapshot_dir, extra)
    managers.append(rlmm)
    rlmm.on_partition_leadership_changes(set(tips), set())
    wait_until(lambda: all(rlmm.is_ready(t) for t in tips), what="partitions ready")
    return rlmm


# -- read-your-writes and queries ------------------------------------------------------------


def test_empty_metadata_partition_is_ready_at_once(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    rlmm = start(managers, InMemoryMetadataTopicIO(), None)
    assert all(rlmm.is_ready(t) for t in TIPS)
    assert list(rlmm.list_remote_log_segments(TIPS[0])) == []


def test_mutations_are_visible_when_their_future_completes(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    rlmm = start(managers, InMemoryMetadataTopicIO(), None)
    for n, tip in enumerate(TIPS):
        m = segment(0, 99, {3: 0}, tip=tip)
        rlmm.add_remote_log_segment_metadata(m).result(5)
        assert [x.remote_log_segment_id for x in rlmm.list_remote_log_segments(tip, 3)] == [
            m.remote_log_segment_id
        ]
        assert rlmm.remote_log_segment_metadata(tip, 3, 50) is None
        rlmm.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED)).result(5)
        found = rlmm.remote_log_segment_metadata(tip, 3, 50)
        assert found is not None and found.state is S.COPY_SEGMENT_FINISHED
        assert rlmm.highest_offset_for_epoch(tip, 3) == 99
        assert len(list(rlmm.list_remote_log_segments(TIPS[0]))) == 1
        assert n == 0 or rlmm.highest_offset_for_epoch(TIPS[0], 3) == 99


def test_events_go_to_the_partitioners_metadata_partition(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = InMemoryMetadataTopicIO()
    rlmm = start(managers, io, None)
    tip = TIPS[4]
    rlmm.add_remote_log_segment_metadata(segment(0, 9, tip=tip)).result(5)
    mp = RemoteLogMetadataTopicPartitioner(5).metadata_partition(tip)
    assert [io.end_offset(p) for p in range(5)] == [1 if p == mp else 0 for p in range(5)]


def test_add_must_be_copy_started_and_update_must_not(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    rlmm = start(managers, InMemoryMetadataTopicIO(), None)
    m = segment(0, 9, tip=TIPS[0])
    with pytest.raises(ValueError, match="COPY_SEGMENT_STARTED"):
        rlmm.add_remote_log_segment_metadata(
            m.create_with_updates(update(m, S.COPY_SEGMENT_FINISHED))
        )
    with pytest.raises(ValueError, match="COPY_SEGMENT_STARTED"):
        rlmm.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_STARTED))


def test_update_of_unknown_segment_fails_the_future(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = InMemoryMetadataTopicIO()
    rlmm = start(managers, io, None)
    f = rlmm.update_remote_log_segment_metadata(
        update(segment(0, 9, tip=TIPS[0]), S.COPY_SEGMENT_FINISHED)
    )
    with pytest.raises(RemoteResourceNotFoundException):
        f.result(5)
    assert sum(io.end_offset(p) for p in range(5)) == 0


# §5.5 57
def test_remote_log_size_per_epoch(managers: list[TopicBasedRemoteLogMetadataManager]) -> None:
    rlmm = start(managers, InMemoryMetadataTopicIO(), None)
    a, b = TIPS[0], TIPS[1]
    for i, size in enumerate((100, 200, 300)):
        for tip, epoch in ((a, 0), (b, i)):
            m = segment(i * 10, i * 10 + 9, {epoch: i * 10}, tip=tip, size=size)
            rlmm.add_remote_log_segment_metadata(m).result(5)
            rlmm.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED)).result(5)
    assert rlmm.remote_log_size(a, 0) == 600
    assert [rlmm.remote_log_size(b, e) for e in (0, 1, 2)] == [100, 200, 300]
    assert rlmm.remote_log_size(a, 7) == 0
    unknown = TopicIdPartition(uuid.uuid4(), "nope", 0)
    with pytest.raises(RemoteResourceNotFoundException):
        rlmm.remote_log_size(unknown, 0)


def test_partition_delete_finished_removes_partition(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    rlmm = start(managers, InMemoryMetadataTopicIO(), None)
    tip = TIPS[2]
    m = segment(0, 99, tip=tip)
    rlmm.add_remote_log_segment_metadata(m).result(5)
    rlmm.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED)).result(5)
    for st in (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED):
        rlmm.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tip, st, 5, 0)
        ).result(5)
        assert rlmm.remote_log_segment_metadata(tip, 0, 10) is not None
    rlmm.put_remote_partition_delete_metadata(
        RemotePartitionDeleteMetadata(tip, P.DELETE_PARTITION_FINISHED, 6, 0)
    ).result(5)
    with pytest.raises(RemoteResourceNotFoundException):
        rlmm.remote_log_segment_metadata(tip, 0, 10)
    assert rlmm.remote_log_segment_metadata(TIPS[3], 0, 10) is None


def test_assigned_but_loading_partition_is_replica_not_available(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = GatedTopicIO()
    writer = start(managers, io, None)
    writer.add_remote_log_segment_metadata(segment(0, 9, tip=TIPS[0])).result(5)
    writer.close()
    io.gate.clear()
    reader = make_rlmm(io, None)
    managers.append(reader)
    reader.on_partition_leadership_changes({TIPS[0]}, set())
    wait_until(io.reads_blocked.is_set, what="replay to start")
    assert not reader.is_ready(TIPS[0])
    with pytest.raises(ReplicaNotAvailableException):
        reader.remote_log_segment_metadata(TIPS[0], 0, 5)
    io.gate.set()
    wait_until(lambda: reader.is_ready(TIPS[0]), what="ready")
    assert len(list(reader.list_remote_log_segments(TIPS[0]))) == 1


# §5.5 58
def test_unassigned_partitions_are_skipped_then_read_on_assignment(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = InMemoryMetadataTopicIO()
    one = {"remote.log.metadata.topic.num.partitions": "1"}
    writer = make_rlmm(io, None, one)
    managers.append(writer)
    writer.on_partition_leadership_changes({TIPS[0], TIPS[1]}, set())
    wait_until(lambda: writer.is_ready(TIPS[1]))
    for tip in (TIPS[0], TIPS[1], TIPS[0]):
        writer.add_remote_log_segment_metadata(segment(0, 9, tip=tip)).result(5)
    reader = make_rlmm(io, None, one)
    managers.append(reader)
    reader.on_partition_leadership_changes({TIPS[0]}, set())
    wait_until(lambda: reader.is_ready(TIPS[0]))
    assert len(list(reader.list_remote_log_segments(TIPS[0]))) == 2
    with pytest.raises(RemoteResourceNotFoundException):
        reader.list_remote_log_segments(TIPS[1])
    reader.on_partition_leadership_changes({TIPS[1]}, set())
    wait_until(lambda: reader.is_ready(TIPS[1]))
    assert len(list(reader.list_remote_log_segments(TIPS[1]))) == 1
    assert len(list(reader.list_remote_log_segments(TIPS[0]))) == 2


def test_ready_means_replayed_up_to_end_captured_at_assignment(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = InMemoryMetadataTopicIO(max_batch=3)
    writer = start(managers, io, None, [TIPS[0]])
    for i in range(40):
        writer.add_remote_log_segment_metadata(segment(i * 10, i * 10 + 9, tip=TIPS[0])).result(5)
    reader = make_rlmm(io, None)
    managers.append(reader)
    reader.on_partition_leadership_changes({TIPS[0]}, set())
    wait_until(lambda: reader.is_ready(TIPS[0]))
    assert len(list(reader.list_remote_log_segments(TIPS[0]))) == 40


def test_stopped_partition_is_forgotten(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    rlmm = start(managers, InMemoryMetadataTopicIO(), None)
    rlmm.add_remote_log_segment_metadata(segment(0, 9, tip=TIPS[0])).result(5)
    rlmm.on_stop_partitions({TIPS[0]})
    wait_until(lambda: not rlmm.is_ready(TIPS[0]))
    with pytest.raises(RemoteResourceNotFoundException):
        rlmm.list_remote_log_segments(TIPS[0])


# §5.5 55 through the manager
def test_lifecycle_lookups_through_manager(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    rlmm = start(managers, InMemoryMetadataTopicIO(), None)
    tip = TIPS[0]
    segs = [
        segment(0, 100, {0: 0, 1: 20, 2: 80}, tip=tip),
        segment(101, 200, {2: 101}, tip=tip),
        segment(201, 300, {2: 201, 3: 240}, tip=tip),
        segment(250, 400, {3: 250, 4: 370}, tip=tip),
    ]
    for m in segs:
        rlmm.add_remote_log_segment_metadata(m).result(5)
        rlmm.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED)).result(5)

    def at(e: int, o: int) -> int | None:
        m = rlmm.remote_log_segment_metadata(tip, e, o)
        ids = [s.remote_log_segment_id for s in segs]
        return None if m is None else ids.index(m.remote_log_segment_id)

    assert [at(1, 40), at(2, 110), at(3, 240), at(3, 250), at(4, 375)] == [0, 1, 2, 3, 3]
    assert [at(1, 110), at(4, 401), at(5, 301)] == [None, None, None]
    assert [rlmm.highest_offset_for_epoch(tip, e) for e in range(6)] == [
        19,
        79,
        239,
        369,
        400,
        None,
    ]


# -- restart -----------------------------------------------------------------------------------


def test_restart_full_replay_rebuilds_identical_state(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = InMemoryMetadataTopicIO(max_batch=7)
    first = start(managers, io, None)
    populate(first)
    before = state(first)
    first.close()
    second = start(managers, io, None)
    assert state(second) == before


def test_restart_from_snapshot_plus_tail_rebuilds_identical_state(
    managers: list[TopicBasedRemoteLogMetadataManager], tmp_path: Path
) -> None:
    io = InMemoryMetadataTopicIO(max_batch=7)
    snaps = tmp_path / "snaps"
    first = start(
        managers, io, snaps, extra={"remote.log.metadata.snapshot.interval.records": "10"}
    )
    populate(first, per_partition=6)
    wait_until(lambda: first.snapshots_written > 0, what="a snapshot")
    # more events after the snapshots: the tail
    populate(first, per_partition=3)
    expected = state(first)
    # a crash: the next start sees the snapshots as they are now, not the ones close() writes
    at_crash = tmp_path / "at-crash"
    shutil.copytree(snaps, at_crash)
    first.close()
    assert list(at_crash.iterdir()), "snapshots were written"
    second = start(managers, io, at_crash)
    assert state(second) == expected
    full = start(managers, io, None)
    assert state(full) == expected


def test_restart_after_clean_close_needs_no_replay(
    managers: list[TopicBasedRemoteLogMetadataManager], tmp_path: Path
) -> None:
    io = GatedTopicIO()
    first = start(managers, io, tmp_path)
    populate(first, per_partition=4)
    expected = state(first)
    first.close()
    io.gate.clear()  # any read would block: readiness must come from the snapshots alone
    second = start(managers, io, tmp_path)
    assert state(second) == expected
    assert not io.reads_blocked.is_set()
    io.gate.set()


def test_corrupt_snapshot_falls_back_to_full_replay(
    managers: list[TopicBasedRemoteLogMetadataManager], tmp_path: Path
) -> None:
    io = InMemoryMetadataTopicIO()
    first = start(managers, io, tmp_path)
    populate(first, per_partition=4)
    expected = state(first)
    first.close()
    for mp in range(5):
        p = snapshot_path(tmp_path, mp)
        if p.exists():
            data = bytearray(p.read_bytes())
            data[len(data) // 2] ^= 0xFF
            p.write_bytes(bytes(data))
    second = start(managers, io, tmp_path)
    assert state(second) == expected


# -- mutators during replay ---------------------------------------------------------------------


def test_mutator_during_replay_waits_until_ready(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = GatedTopicIO()
    writer = start(managers, io, None, [TIPS[0]])
    old = segment(0, 99, tip=TIPS[0])
    writer.add_remote_log_segment_metadata(old).result(5)
    writer.close()
    io.gate.clear()
    reader = make_rlmm(io, None)
    managers.append(reader)
    reader.on_partition_leadership_changes({TIPS[0]}, set())
    # the update refers to a segment only the replay knows about
    f = reader.update_remote_log_segment_metadata(update(old, S.COPY_SEGMENT_FINISHED))
    wait_until(io.reads_blocked.is_set, what="replay to block")
    assert not f.done()
    mp = RemoteLogMetadataTopicPartitioner(5).metadata_partition(TIPS[0])
    assert io.end_offset(mp) == 1, "nothing may be appended before the partition is ready"
    io.gate.set()
    f.result(5)
    assert reader.is_ready(TIPS[0])
    found = reader.remote_log_segment_metadata(TIPS[0], 0, 50)
    assert found is not None and found.state is S.COPY_SEGMENT_FINISHED


def test_mutator_times_out_if_partition_never_becomes_ready(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = GatedTopicIO()
    writer = start(managers, io, None, [TIPS[0]])
    writer.add_remote_log_segment_metadata(segment(0, 9, tip=TIPS[0])).result(5)
    io.gate.clear()
    reader = make_rlmm(io, None, {"remote.log.metadata.consume.wait.ms": "200"})
    managers.append(reader)
    reader.on_partition_leadership_changes({TIPS[0]}, set())
    f = reader.add_remote_log_segment_metadata(segment(10, 19, tip=TIPS[0]))
    with pytest.raises(RetriableRemoteStorageException, match="timed out"):
        f.result(5)
    io.gate.set()


# -- initialization -------------------------------------------------------------------------------


def test_partition_count_mismatch_is_a_clear_startup_error() -> None:
    io = InMemoryMetadataTopicIO()
    io.ensure_topic(7, {})
    rlmm = TopicBasedRemoteLogMetadataManager(io)
    rlmm.configure({"remote.log.metadata.topic.num.partitions": "5"})
    try:
        with pytest.raises(RemoteLogMetadataInitializationError, match=r"has 7 partitions.*=5"):
            rlmm.await_initialized(5)
    finally:
        rlmm.close()


class BrokenTopicIO(InMemoryMetadataTopicIO):
    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        raise OSError("log dir offline")


def test_initialization_gives_up_after_max_timeout() -> None:
    rlmm = TopicBasedRemoteLogMetadataManager(BrokenTopicIO())
    rlmm.configure(
        {
            "remote.log.metadata.initialization.retry.max.timeout.ms": "200",
            "remote.log.metadata.initialization.retry.interval.ms": "20",
        }
    )
    try:
        with pytest.raises(
            RemoteLogMetadataInitializationError,
            match=r"within 200 ms .*retry\.max\.timeout\.ms.*log dir offline",
        ):
            rlmm.await_initialized(5)
        f = rlmm.add_remote_log_segment_metadata(segment(0, 9, tip=TIPS[0]))
        with pytest.raises(RemoteLogMetadataInitializationError):
            f.result(5)
        rlmm.on_partition_leadership_changes({TIPS[0]}, set())
        assert not rlmm.is_ready(TIPS[0])
    finally:
        rlmm.close()


def test_topic_created_with_configured_partitions_and_policy() -> None:
    io = InMemoryMetadataTopicIO()
    rlmm = make_rlmm(io, None, {"remote.log.metadata.topic.num.partitions": "3"})
    try:
        assert io.end_offset(2) == 0
        with pytest.raises(IndexError):
            io.end_offset(3)
        assert io.configs["cleanup.policy"] == "delete"
        assert io.configs["retention.ms"] == "-1"
        assert io.configs["remote.storage.enable"] == "false"
    finally:
        rlmm.close()


def test_unreadable_record_version_stops_serving(
    managers: list[TopicBasedRemoteLogMetadataManager],
) -> None:
    io = InMemoryMetadataTopicIO()
    io.ensure_topic(5, {})
    mp = RemoteLogMetadataTopicPartitioner(5).metadata_partition(TIPS[0])
    bad = bytearray(serialize(segment(0, 9, tip=TIPS[0])))
    bad[1] = 9
    io.append(mp, None, bytes(bad))
    rlmm = make_rlmm(io, None)
    managers.append(rlmm)
    rlmm.on_partition_leadership_changes({TIPS[0]}, set())
    f = rlmm.add_remote_log_segment_metadata(segment(10, 19, tip=TIPS[0]))
    with pytest.raises(Exception, match="unsupported version 9"):
        f.result(5)
    assert not rlmm.is_ready(TIPS[0])


def test_kafka_default_class_name_loads_topic_based_manager() -> None:
    from tierlog.tiered.api import load_remote_log_metadata_manager
    from tierlog.tiered.metadata import RLMM_ALIASES

    rlmm = load_remote_log_metadata_manager(
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        RLMM_ALIASES,
        {"rlmm.config.remote.log.metadata.topic.num.partitions": "3"},
    )
    try:
        assert isinstance(rlmm, TopicBasedRemoteLogMetadataManager)
        io = InMemoryMetadataTopicIO()
        rlmm.bind_metadata_topic(io)
        rlmm.await_initialized(5)
        assert io.end_offset(2) == 0
    finally:
        rlmm.close()
