"""Leader-epoch cache rules (Kafka LeaderEpochFileCache) and their use by the log."""

from __future__ import annotations

from pathlib import Path

from tests.log.log_helpers import TP, ManagerFactory, batch, new_log
from tierlog.log import EpochEntry, LeaderEpochCache
from tierlog.protocol.records import scan_batches


def test_assign_keeps_entries_monotonic(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)  # same epoch, later offset: no change
    assert cache.assign(2, 10)
    assert cache.assign(4, 20)
    assert cache.assign(3, 15)  # lower epoch wins only by truncating what is above it
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 15)]
    reloaded = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert reloaded.entries() == cache.entries()


def test_end_offset_for_and_epoch_for_offset(tmp_path: Path) -> None:
    cache = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(5, 20)])
    assert cache.end_offset_for(5, 33) == (5, 33)
    assert cache.end_offset_for(3, 33) == (3, 20)
    assert cache.end_offset_for(4, 33) == (3, 20)
    assert cache.end_offset_for(0, 33) == (0, 0)
    assert cache.end_offset_for(6, 33) == (-1, -1)
    assert cache.end_offset_for(-1, 33) == (-1, -1)
    assert cache.epoch_for_offset(9) == 1
    assert cache.epoch_for_offset(10) == 3
    assert cache.epoch_for_offset(25) == 5


def test_truncation_from_both_ends_and_range(tmp_path: Path) -> None:
    cache = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(5, 20)])
    assert cache.entries_in_range(5, 15) == [EpochEntry(1, 5), EpochEntry(3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries() == [EpochEntry(3, 12), EpochEntry(5, 20)]
    cache.truncate_from_end(20)
    assert cache.entries() == [EpochEntry(3, 12)]


def test_appends_stamp_leader_epoch_and_record_it(make_manager: ManagerFactory) -> None:
    mgr = make_manager()
    part = new_log(mgr)
    part.append_as_leader(batch(2), leader_epoch=0)
    part.append_as_leader(batch(3), leader_epoch=2)
    part.append_as_leader(batch(1), leader_epoch=2)
    assert part.leader_epoch_cache.entries() == [EpochEntry(0, 0), EpochEntry(2, 2)]
    epochs = [h.partition_leader_epoch for h in scan_batches(part.read(0, 10_000).to_bytes())]
    assert epochs == [0, 2, 2]
    mgr.shutdown()
    reloaded = make_manager().get_log(TP)
    assert reloaded is not None
    assert reloaded.leader_epoch_cache.entries() == [EpochEntry(0, 0), EpochEntry(2, 2)]
