"""The controller's partition duties (spec §6.4-6.5, Z-7, Z-8): next_state as a pure rule,
and PartitionController reconciling a real ZooKeeper as brokers come and go."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.helpers.poll import wait_until
from tierlog.cluster import paths
from tierlog.cluster.cluster_view import ClusterView, PartitionInfo
from tierlog.cluster.controller import PartitionController, next_state
from tierlog.cluster.election import elect_controller
from tierlog.cluster.fencing import FencedWriter
from tierlog.cluster.registration import register_broker
from tierlog.cluster.settings import ClusterSettings
from tierlog.cluster.topic_creation import create_topic
from tierlog.cluster.znodes import (
    LEADER_RECOVERY_RECOVERING,
    NO_LEADER,
    BrokerRegistration,
    PartitionState,
)
from tierlog.cluster.zookeeper import ZooKeeperClient
from tierlog.config import Endpoint

A = (1, 2, 3)


def info(state: PartitionState | None, replicas: tuple[int, ...] = A) -> PartitionInfo:
    return PartitionInfo("t", 0, replicas, state=state, partition_epoch=0 if state else -1)


def test_next_state_rules() -> None:
    s = PartitionState(1, 4, (1, 2, 3), 1)
    assert next_state(info(s), {1, 2, 3}, False, 2) is None, "healthy: nothing to write"
    assert next_state(info(s), {1, 2}, False, 2) == PartitionState(1, 5, (1, 2), 2)
    assert next_state(info(s), {2, 3}, False, 2) == PartitionState(2, 5, (2, 3), 2)
    assert next_state(info(s), set(), False, 2) == PartitionState(NO_LEADER, 5, (3,), 2)
    assert next_state(info(PartitionState(NO_LEADER, 5, (3,), 2)), set(), False, 2) is None
    back = next_state(info(PartitionState(NO_LEADER, 5, (3,), 2)), {3}, False, 2)
    assert back == PartitionState(3, 6, (3,), 2)
    assert next_state(info(PartitionState(NO_LEADER, 5, (3,), 2)), {1}, False, 2) is None
    assert next_state(info(PartitionState(NO_LEADER, 5, (3,), 2)), {1}, True, 2) == (
        PartitionState(1, 6, (1,), 2, LEADER_RECOVERY_RECOVERING)
    )
    assert next_state(info(None), {2}, False, 2) == PartitionState(2, 0, (2,), 2)
    assert next_state(info(None), set(), False, 2) is None
    newer = PartitionState(9, 4, (9,), 3)
    assert next_state(info(newer), {1}, True, 2) is None, "a newer controller's state (Z-3)"


@pytest.fixture
def clients(
    cluster_settings: Callable[..., ClusterSettings],
) -> Iterator[Callable[[], ZooKeeperClient]]:
    made: list[ZooKeeperClient] = []

    def make() -> ZooKeeperClient:
        settings = cluster_settings(0)
        c = ZooKeeperClient(settings.zookeeper, 2000, 15000)
        c.start()
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_next_state_in_a_controlled_shutdown() -> None:
    """Z-10, checklist 41: a shutting-down leader hands leadership to another ISR member, a
    shutting-down follower leaves the ISR, neither is elected; the last member stays."""
    s = PartitionState(1, 4, (1, 2, 3), 1)
    live = {1, 2, 3}
    assert next_state(info(s), live, False, 2, {1}) == PartitionState(2, 5, (2, 3), 2)
    assert next_state(info(s), live, False, 2, {3}) == PartitionState(1, 5, (1, 2), 2)
    alone = PartitionState(1, 4, (1,), 1)
    assert next_state(info(alone), live, False, 2, {1}) is None, "no one to take over"
    offline = PartitionState(NO_LEADER, 4, (2, 3), 1)
    assert next_state(info(offline), {2, 3}, False, 2, {2}) == PartitionState(3, 5, (3,), 2)


def test_controller_follows_broker_failures_and_returns(
    clients: Callable[[], ZooKeeperClient],
) -> None:
    brokers = {}
    for b in A:
        brokers[b] = clients()
        register_broker(brokers[b].kazoo, BrokerRegistration(b, (Endpoint("PLAINTEXT", "h", b),)))
    zk = clients()
    lease = elect_controller(zk.kazoo, 100, 0)
    assert lease is not None
    writer = FencedWriter(zk.kazoo, lease)
    view = ClusterView(zk.kazoo)
    controller = PartitionController(view, writer)
    view.add_listener(controller.on_view_change)
    view.start()
    controller.start()
    try:
        create_topic(writer, "t", "AAAAAAAAAAAAAAAAAAAAAA", {0: [1, 2, 3], 1: [2, 3, 1]}, {}, A)
        create_topic(writer, "later", "BBBBBBBBBBBBBBBBBBBBBB", {0: [4]}, {}, A)

        def state(topic: str = "t", p: int = 0) -> PartitionState | None:
            i = view.partition(topic, p)
            return None if i is None else i.state

        epoch = lease.epoch
        wait_until(lambda: state() == PartitionState(1, 0, (1, 2, 3), epoch), 10, what="t-0")

        brokers.pop(1).close()
        wait_until(lambda: state() == PartitionState(2, 1, (2, 3), epoch), 10, what="failover")
        wait_until(lambda: state("t", 1) == PartitionState(2, 1, (2, 3), epoch), 10, what="isr")

        brokers.pop(2).close()
        brokers.pop(3).close()

        # Both gone (seen one by one or together): offline, the last ISR member kept.
        def led_by(leader: int) -> PartitionState | None:
            s = state()
            return s if s is not None and s.leader == leader else None

        offline = wait_until(lambda: led_by(NO_LEADER), 10, what="offline")
        assert offline is not None
        assert offline.isr == (3,) and offline.leader_epoch in (2, 3)

        brokers[3] = clients()
        register_broker(brokers[3].kazoo, BrokerRegistration(3, (Endpoint("PLAINTEXT", "h", 3),)))
        back = PartitionState(3, offline.leader_epoch + 1, (3,), epoch)
        wait_until(lambda: state() == back, 10, what="3 leads")

        assert state("later") is None, "no live replica: no state yet"
        brokers[4] = clients()
        register_broker(brokers[4].kazoo, BrokerRegistration(4, (Endpoint("PLAINTEXT", "h", 4),)))
        wait_until(lambda: state("later") == PartitionState(4, 0, (4,), epoch), 10, what="new")
    finally:
        controller.close()
        view.close()


def test_a_bounced_broker_is_treated_as_failed_once(
    clients: Callable[[], ZooKeeperClient],
) -> None:
    """Broker 1 fails and comes back between two looks of the controller (its registration
    is replaced in one multi-op): it loses its leadership and ISR places as a failed broker
    would (checklist 44), and is live again afterwards."""
    sessions = {b: clients() for b in (1, 2)}
    for b, c in sessions.items():
        register_broker(c.kazoo, BrokerRegistration(b, (Endpoint("PLAINTEXT", "h", b),)))
    zk = clients()
    lease = elect_controller(zk.kazoo, 100, 0)
    assert lease is not None
    writer = FencedWriter(zk.kazoo, lease)
    view = ClusterView(zk.kazoo)
    controller = PartitionController(view, writer)
    view.add_listener(controller.on_view_change)
    view.start()
    controller.start()
    try:
        create_topic(writer, "t", "AAAAAAAAAAAAAAAAAAAAAA", {0: [1, 2], 1: [1]}, {}, {1, 2})

        def state(p: int) -> PartitionState | None:
            i = view.partition("t", p)
            return None if i is None else i.state

        e = lease.epoch
        wait_until(lambda: state(0) == PartitionState(1, 0, (1, 2), e), 10, what="t-0")
        first_epoch = view.brokers()[1].broker_epoch

        bounced = clients()
        tx = bounced.kazoo.transaction()
        tx.delete(paths.broker(1))
        tx.create(
            paths.broker(1),
            BrokerRegistration(1, (Endpoint("PLAINTEXT", "h", 1),)).encode(),
            ephemeral=True,
        )
        assert not any(isinstance(r, Exception) for r in tx.commit())
        wait_until(lambda: view.brokers()[1].broker_epoch > first_epoch, 10, what="bounce seen")
        wait_until(lambda: state(0) == PartitionState(2, 1, (2,), e), 10, what="t-0 moves to 2")
        # t-1's only replica is 1: offline for the failure, led by 1 again once it is live.
        wait_until(lambda: state(1) == PartitionState(1, 2, (1,), e), 10, what="t-1 back on 1")
    finally:
        controller.close()
        view.close()
