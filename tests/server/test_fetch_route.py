"""Fetch's routing step: which path answers each requested partition."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.server.handlers.fetch import FetchPath, PartitionFetch, route


def _log(tmp_path: Path, *, remote: bool) -> PartitionLog:
    logs = LogManager([tmp_path / "data"], LogConfig(), remote_storage_system_enable=True)
    logs.load()
    tp = TopicPartition("t", 0)
    plog = logs.create_log(tp, uuid.uuid4(), LogConfig(remote_storage_enable=remote))
    plog.append_as_leader(build_batch([SimpleRecord(b"v%d" % i) for i in range(20)]), 0)
    return plog


@pytest.fixture
def tiered_log(tmp_path: Path) -> PartitionLog:
    """Offsets 0..9 only in remote storage, 10..19 local."""
    plog = _log(tmp_path, remote=True)
    plog.update_highest_offset_in_remote_storage(9)
    plog.local_log_start_offset = 10
    return plog


def _at(plog: PartitionLog | None, offset: int, error: ErrorCode | None = None) -> PartitionFetch:
    return PartitionFetch(0, plog, error, offset, 1 << 20)


@pytest.mark.parametrize(
    ("offset", "follower", "tiered_reads", "path"),
    [
        (12, False, True, FetchPath.HOT),
        (12, True, True, FetchPath.HOT),
        (20, False, True, FetchPath.HOT),
        (3, False, True, FetchPath.TIERED),
        (3, True, True, FetchPath.FOLLOWER_TIERED),
        (3, True, False, FetchPath.FOLLOWER_TIERED),
        (3, False, False, FetchPath.HOT),
        (25, False, True, FetchPath.HOT),
    ],
)
def test_route_of_a_tiered_partition(
    tiered_log: PartitionLog, offset: int, follower: bool, tiered_reads: bool, path: FetchPath
) -> None:
    assert route(_at(tiered_log, offset), follower=follower, tiered_reads=tiered_reads) is path


def test_an_untiered_log_is_always_read_locally(tmp_path: Path) -> None:
    plog = _log(tmp_path, remote=False)
    plog.local_log_start_offset = 10
    for follower in (False, True):
        assert route(_at(plog, 3), follower=follower, tiered_reads=True) is FetchPath.HOT


def test_a_resolution_error_routes_to_the_error_path(tiered_log: PartitionLog) -> None:
    fenced = _at(tiered_log, 12, ErrorCode.FENCED_LEADER_EPOCH)
    assert route(fenced, follower=False, tiered_reads=True) is FetchPath.ERROR
    missing = _at(None, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert route(missing, follower=True, tiered_reads=True) is FetchPath.ERROR
