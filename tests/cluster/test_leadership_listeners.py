"""``ReplicaManager``'s leadership listeners: the seam through which coordinators on an
internal topic follow its leadership (Kafka's ``onLeadershipChange`` / ``onResignation``).
Calls come on the loop, once per leader epoch, in epoch order; older states are never
reported; a listener added late is told the current roles; a replica that goes away is
``stopped``; only the listened topic is reported."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.helpers.replica_manager import ME, replica_manager
from tests.server.group.group_helpers import run_async
from tierlog.cluster.cluster_view import PartitionInfo
from tierlog.cluster.znodes import PartitionState
from tierlog.replication.manager import ReplicaManager

TOPIC = "__consumer_offsets"


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def became_leader(self, partition: int, leader_epoch: int) -> None:
        self.calls.append(("leader", partition, leader_epoch))

    def became_follower(self, partition: int, leader_epoch: int) -> None:
        self.calls.append(("follower", partition, leader_epoch))

    def stopped(self, partition: int) -> None:
        self.calls.append(("stopped", partition, -1))


def _apply(
    m: ReplicaManager,
    partition: int,
    leader: int,
    epoch: int,
    version: int | None = None,
    topic: str = TOPIC,
    replicas: tuple[int, ...] = (1, 2, 3),
) -> None:
    state = PartitionState(leader, epoch, (1, 2, 3), 1)
    info = PartitionInfo(
        topic, partition, replicas, (), (), state, epoch if version is None else version
    )
    m._apply(info)


def _states(m: ReplicaManager, states: Mapping[int, tuple[int, int]]) -> None:
    for p, (leader, epoch) in states.items():
        _apply(m, p, leader, epoch)


@run_async
async def test_calls_follow_leader_epochs_in_order(tmp_path: Path) -> None:
    async with replica_manager(tmp_path, {TOPIC: 2, "other": 2}) as manager:
        rec = _Recorder()
        manager.add_leadership_listener(TOPIC, rec)
        _apply(manager, 0, ME, 1)
        _apply(manager, 0, ME, 1, version=5)  # same epoch, ISR refresh: no transition
        _apply(manager, 0, 2, 2)
        _apply(manager, 0, ME, 1, version=9)  # older epoch: ignored
        _apply(manager, 0, ME, 4)  # epoch 3 never seen: still one call, in order
        _apply(manager, 0, ME, 5)  # re-elected: leader again at the new epoch
        assert rec.calls == [
            ("leader", 0, 1),
            ("follower", 0, 2),
            ("leader", 0, 4),
            ("leader", 0, 5),
        ]


@run_async
async def test_no_leader_is_a_resignation(tmp_path: Path) -> None:
    async with replica_manager(tmp_path, {TOPIC: 2, "other": 2}) as manager:
        rec = _Recorder()
        manager.add_leadership_listener(TOPIC, rec)
        _apply(manager, 1, ME, 1)
        _apply(manager, 1, -1, 2)
        assert rec.calls == [("leader", 1, 1), ("follower", 1, 2)]


@run_async
async def test_a_late_listener_is_told_the_current_roles(tmp_path: Path) -> None:
    async with replica_manager(tmp_path, {TOPIC: 2, "other": 2}) as manager:
        _states(manager, {0: (2, 3), 1: (ME, 7)})
        rec = _Recorder()
        manager.add_leadership_listener(TOPIC, rec)
        assert rec.calls == [("follower", 0, 3), ("leader", 1, 7)]


@run_async
async def test_a_replica_moved_away_is_stopped(tmp_path: Path) -> None:
    async with replica_manager(tmp_path, {TOPIC: 2, "other": 2}) as manager:
        rec = _Recorder()
        manager.add_leadership_listener(TOPIC, rec)
        _apply(manager, 0, ME, 1)
        _apply(manager, 0, 2, 2, replicas=(2, 3))
        assert rec.calls == [("leader", 0, 1), ("stopped", 0, -1)]


@run_async
async def test_only_the_listened_topic_is_reported_and_removal_stops_calls(tmp_path: Path) -> None:
    async with replica_manager(tmp_path, {TOPIC: 2, "other": 2}) as manager:
        rec = _Recorder()
        manager.add_leadership_listener(TOPIC, rec)
        _apply(manager, 0, ME, 1, topic="other")
        assert rec.calls == []
        manager.remove_leadership_listener(TOPIC, rec)
        _apply(manager, 0, ME, 1)
        assert rec.calls == []


@run_async
async def test_a_failing_listener_does_not_stop_the_others(tmp_path: Path) -> None:
    async with replica_manager(tmp_path, {TOPIC: 2, "other": 2}) as manager:

        class Broken(_Recorder):
            def became_leader(self, partition: int, leader_epoch: int) -> None:
                raise RuntimeError("boom")

        rec = _Recorder()
        manager.add_leadership_listener(TOPIC, Broken())
        manager.add_leadership_listener(TOPIC, rec)
        _apply(manager, 0, ME, 1)
        assert rec.calls == [("leader", 0, 1)]
        assert manager.partition(TOPIC, 0) is not None
        assert manager.partition(TOPIC, 0).is_leader  # type: ignore[union-attr]
