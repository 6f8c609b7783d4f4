"""The directory storage manager: layout, events, injected faults, and its inventory."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.storage.directory import (
    COPY,
    DELETE,
    FETCH,
    FETCH_INDEX,
    DirectoryRemoteStorageManager,
    read_events,
    write_faults,
)
from tierlog.tiered.api import (
    IndexType,
    LogSegmentData,
    ObjectKind,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    SupportsInventory,
    SupportsReadAhead,
    SupportsSegmentManifests,
    TopicIdPartition,
    load_remote_storage_manager,
)

TIP = TopicIdPartition(uuid.UUID(int=42), "t", 3)


def metadata(start: int = 100, end: int = 199) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=5,
        broker_id=0,
        event_timestamp_ms=1,
        segment_size_in_bytes=10,
        custom_metadata=None,
        state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        segment_leader_epochs={0: start},
    )


def segment_files(tmp: Path, *, txn: bool) -> LogSegmentData:
    src = tmp / "local"
    src.mkdir(exist_ok=True)
    (src / "a.log").write_bytes(bytes(range(50)))
    (src / "a.index").write_bytes(b"I" * 8)
    (src / "a.timeindex").write_bytes(b"T" * 12)
    (src / "a.snapshot").write_bytes(b"S")
    if txn:
        (src / "a.txnindex").write_bytes(b"X" * 34)
    return LogSegmentData(
        log_segment=src / "a.log",
        offset_index=src / "a.index",
        time_index=src / "a.timeindex",
        transaction_index=src / "a.txnindex",
        producer_snapshot_index=src / "a.snapshot",
        leader_epoch_index=b"0\n1\n0 100\n",
    )


@pytest.fixture
def rsm(tmp_path: Path) -> Iterator[DirectoryRemoteStorageManager]:
    r = DirectoryRemoteStorageManager()
    r.configure({"dir": str(tmp_path / "remote"), "broker.id": "7"})
    yield r
    r.close()


def test_copy_then_fetch_segment_and_every_index(
    rsm: DirectoryRemoteStorageManager, tmp_path: Path
) -> None:
    md = metadata()
    assert rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=True)) is None
    with rsm.fetch_log_segment(md, 10) as f:
        assert f.read() == bytes(range(10, 50))
    with rsm.fetch_log_segment(md, 10, 19) as f:
        assert f.read() == bytes(range(10, 20))
    expected = {
        IndexType.OFFSET: b"I" * 8,
        IndexType.TIMESTAMP: b"T" * 12,
        IndexType.TRANSACTION: b"X" * 34,
        IndexType.PRODUCER_SNAPSHOT: b"S",
        IndexType.LEADER_EPOCH: b"0\n1\n0 100\n",
    }
    for kind, content in expected.items():
        with rsm.fetch_index(md, kind) as f:
            assert f.read() == content
    assert [e.type for e in rsm.events()] == [COPY, FETCH, FETCH] + [FETCH_INDEX] * 5
    assert rsm.stored_filesets(TIP) == [f"{100:020d}-" + rsm.stored_filesets(TIP)[0][21:]]


def test_missing_txn_index_and_missing_segment_are_not_found(
    rsm: DirectoryRemoteStorageManager, tmp_path: Path
) -> None:
    md = metadata()
    rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=False))
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_index(md, IndexType.TRANSACTION)
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(metadata(), 0)
    with pytest.raises(RemoteStorageException):
        rsm.fetch_log_segment(md, 51)


def test_delete_is_idempotent_and_recorded(
    rsm: DirectoryRemoteStorageManager, tmp_path: Path
) -> None:
    md = metadata()
    rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=True))
    rsm.delete_log_segment_data(md)
    rsm.delete_log_segment_data(md)
    assert rsm.stored_filesets(TIP) == []
    assert len(rsm.events(DELETE)) == 2


def test_delete_disabled_is_a_silent_noop(tmp_path: Path) -> None:
    r = DirectoryRemoteStorageManager()
    r.configure({"dir": str(tmp_path / "r"), "delete.enable": "false"})
    md = metadata()
    r.copy_log_segment_data(md, segment_files(tmp_path, txn=False))
    r.delete_log_segment_data(md)
    assert len(r.stored_filesets(TIP)) == 1
    assert r.events(DELETE) == []
    r.close()


def test_injected_copy_failure_leaves_no_partial_fileset(
    rsm: DirectoryRemoteStorageManager, tmp_path: Path
) -> None:
    rsm.inject_faults(fail_copy=1)
    md = metadata()
    with pytest.raises(RemoteStorageException):
        rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=True))
    assert rsm.stored_filesets(TIP) == []
    assert [(e.type, e.failed) for e in rsm.events()] == [(COPY, True)]
    rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=True))
    assert rsm.events(COPY, include_failed=False)[0].segment_id == str(md.remote_log_segment_id.id)


def test_control_file_faults_reach_the_instance(
    rsm: DirectoryRemoteStorageManager, tmp_path: Path
) -> None:
    write_faults(rsm.root, fail_delete=1, custom_metadata_bytes=256)
    md = metadata()
    custom = rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=True))
    assert custom is not None and len(custom) == 256
    with pytest.raises(RemoteStorageException):
        rsm.delete_log_segment_data(md)
    rsm.delete_log_segment_data(md)
    assert [e.failed for e in rsm.events(DELETE)] == [True, False]


def test_events_file_is_readable_from_outside(
    rsm: DirectoryRemoteStorageManager, tmp_path: Path
) -> None:
    md = metadata()
    rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=True))
    rsm.delete_log_segment_data(md)
    assert read_events(rsm.root, 7) == rsm.events()
    assert [e.seq for e in read_events(rsm.root, 7)] == [1, 2]


def test_wait_for_wakes_on_event(rsm: DirectoryRemoteStorageManager, tmp_path: Path) -> None:
    md = metadata()
    data = segment_files(tmp_path, txn=True)
    t = threading.Thread(target=rsm.copy_log_segment_data, args=(md, data))
    t.start()
    events = rsm.wait_for(lambda evs: any(e.type == COPY for e in evs), timeout_s=10)
    t.join()
    assert events[0].start_offset == 100
    with pytest.raises(TimeoutError):
        rsm.wait_for(lambda evs: len(evs) > 5, timeout_s=0.05)


def test_loadable_as_plugin(tmp_path: Path) -> None:
    r = load_remote_storage_manager(
        "tierlog.storage.directory:DirectoryRemoteStorageManager",
        {},
        {"rsm.config.dir": str(tmp_path / "p"), "rsm.config.broker.id": "3"},
    )
    assert isinstance(r, DirectoryRemoteStorageManager)
    assert r.broker_id == 3 and r in DirectoryRemoteStorageManager.instances()
    r.close()
    assert r not in DirectoryRemoteStorageManager.instances()


def test_declares_an_inventory_but_neither_read_ahead_nor_manifests() -> None:
    rsm = DirectoryRemoteStorageManager()
    assert isinstance(rsm, SupportsInventory)
    assert not isinstance(rsm, SupportsReadAhead)
    assert not isinstance(rsm, SupportsSegmentManifests)


def test_keys_map_to_topic_id_partition_segment_and_kind(
    rsm: DirectoryRemoteStorageManager, tmp_path: Path
) -> None:
    md = metadata()
    rsm.copy_log_segment_data(md, segment_files(tmp_path, txn=True))
    (rsm.root / "faults.json").write_text("{}")  # the root's own files are bookkeeping
    listed = [o for page in rsm.list_objects(page_size=4) for o in page]
    assert len(listed) == 6
    tip = md.topic_id_partition
    kinds: dict[ObjectKind, int] = {}
    for o in listed:
        found = rsm.identify(o.key)
        assert found is not None, o.key
        assert (found.topic_id, found.topic, found.partition) == (tip.topic_id, "t", 3)
        assert found.segment_id == md.remote_log_segment_id.id
        assert found.segment_key == rsm.segment_key(md)
        kinds[found.kind] = kinds.get(found.kind, 0) + 1
        if found.kind is ObjectKind.LOG:
            assert o.size == 50
    assert kinds == {ObjectKind.LOG: 1, ObjectKind.INDEX: 5}
    assert set(rsm.required_keys(md)) <= {o.key for o in listed}
    assert rsm.metadata_sizes(md) == {ObjectKind.LOG: md.segment_size_in_bytes}
    assert rsm.recorded_size(md) is None
    assert rsm.identify(rsm.segment_key(md) + ".log.bak") is None
    assert rsm.identify("events-7.jsonl") is None

    with pytest.raises(RemoteStorageException, match="outside"):
        rsm.delete_objects([rsm.required_keys(md)[0], "../elsewhere"])
    assert all(rsm.has_object(k) for k in rsm.required_keys(md))  # nothing deleted
    rsm.delete_objects([o.key for o in listed])
    assert not any(rsm.has_object(o.key) for o in listed)


def test_a_private_temporary_root_is_not_an_inventory() -> None:
    rsm = DirectoryRemoteStorageManager()
    rsm.configure({})
    try:
        with pytest.raises(RemoteStorageException, match=r"rsm\.config\.dir"):
            rsm.location()
    finally:
        rsm.close()


def test_the_embedded_default_is_next_to_the_first_log_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "data", tmp_path / "more"]
    assert DirectoryRemoteStorageManager.default_config(dirs) == {
        "dir": str(tmp_path / "data-remote")
    }
