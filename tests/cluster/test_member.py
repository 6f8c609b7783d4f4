"""ClusterMember, the long-lived registration and controller contention of a broker, against
a real ZooKeeper: exactly one controller, failover with a higher epoch, resignation when the
session is lost, re-registration with a new broker epoch."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from helpers.poll import wait_until
from helpers.zookeeper import ZooKeeperServer, expire_session
from tierlog.cluster import paths
from tierlog.cluster.election import ControllerLease, read_controller, read_controller_epoch
from tierlog.cluster.member import ClusterMember
from tierlog.cluster.registration import BrokerIdInUseError, live_brokers
from tierlog.cluster.settings import ClusterSettings


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[str] = []
        self.leases: list[ControllerLease] = []

    def elected(self, lease: ControllerLease) -> None:
        with self.lock:
            self.events.append("elected")
            self.leases.append(lease)

    def resigned(self) -> None:
        with self.lock:
            self.events.append("resigned")


@pytest.fixture
def members(
    cluster_settings: Callable[..., ClusterSettings],
) -> Iterator[Callable[..., tuple[ClusterMember, Recorder]]]:
    made: list[ClusterMember] = []

    def make(broker_id: int, rack: str | None = None) -> tuple[ClusterMember, Recorder]:
        rec = Recorder()
        member = ClusterMember(cluster_settings(broker_id, rack), rec.elected, rec.resigned)
        made.append(member)
        member.start()
        return member, rec

    yield make
    for m in made:
        m.close()


def test_members_register_and_elect_one_controller(
    members: Callable[..., tuple[ClusterMember, Recorder]], kazoo_client: KazooClient
) -> None:
    group = [members(i, rack=f"r{i % 2}") for i in (1, 2, 3)]
    assert sorted(live_brokers(kazoo_client)) == [1, 2, 3]
    assert live_brokers(kazoo_client)[2].rack == "r0"
    controller = read_controller(kazoo_client)
    assert controller == 1, "the first to start is elected"
    assert [m.is_controller for m, _ in group] == [True, False, False]
    assert [rec.events for _, rec in group] == [["elected"], [], []]
    wait_until(lambda: all(m.controller_id == 1 for m, _ in group), 10, what="controller seen")
    for m, _ in group:
        assert m.registered is not None
        assert m.registered.broker_epoch == kazoo_client.get(paths.broker(m.broker_id))[1].czxid


def test_failover_elects_another_with_a_higher_epoch(
    members: Callable[..., tuple[ClusterMember, Recorder]], kazoo_client: KazooClient
) -> None:
    (a, rec_a), (b, rec_b), (c, rec_c) = members(1), members(2), members(3)
    first_epoch = read_controller_epoch(kazoo_client)[0]
    a.close()
    assert rec_a.events == ["elected", "resigned"]
    wait_until(lambda: read_controller(kazoo_client) in (2, 3), 10, what="failover")
    wait_until(lambda: b.is_controller or c.is_controller, 10, what="new controller knows")
    assert not (b.is_controller and c.is_controller)
    new_leases = rec_b.leases + rec_c.leases
    assert [lease.epoch for lease in new_leases] == [first_epoch + 1]
    assert read_controller_epoch(kazoo_client)[0] == first_epoch + 1
    assert sorted(live_brokers(kazoo_client)) == [2, 3]


def test_session_expiry_resigns_and_re_registers(
    zookeeper: ZooKeeperServer,
    members: Callable[..., tuple[ClusterMember, Recorder]],
    kazoo_client: KazooClient,
) -> None:
    (a, rec_a), (b, _) = members(1), members(2)
    assert a.is_controller and a.registered is not None
    first_broker_epoch = a.registered.broker_epoch
    expire_session(zookeeper.connect, a.zk.kazoo.client_id)
    wait_until(lambda: "resigned" in rec_a.events, 15, what="controller resigns")
    wait_until(lambda: b.is_controller, 15, what="broker 2 takes over")
    wait_until(
        lambda: a.registered is not None and a.registered.broker_epoch > first_broker_epoch,
        15,
        what="broker 1 re-registers",
    )
    assert kazoo_client.get(paths.broker(1))[1].czxid == a.registered.broker_epoch
    assert sorted(live_brokers(kazoo_client)) == [1, 2]
    wait_until(lambda: a.controller_id == 2, 10, what="broker 1 sees the new controller")
    assert not a.is_controller
    assert rec_a.events == ["elected", "resigned"]


def test_a_duplicate_broker_id_fails_to_start(
    members: Callable[..., tuple[ClusterMember, Recorder]],
    cluster_settings: Callable[..., ClusterSettings],
) -> None:
    members(4)
    with pytest.raises(BrokerIdInUseError):
        ClusterMember(cluster_settings(4)).start()
