"""Against a real ZooKeeper: broker registration lives and dies with its session (Z-4, Z-5),
one controller is elected through /controller with /controller_epoch bumped in the same
multi-op (Z-1), and a deposed controller's writes are refused (Z-2)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from helpers.poll import wait_until
from helpers.zookeeper import ZooKeeperServer, expire_session
from tierlog.cluster import paths
from tierlog.cluster.election import elect_controller, read_controller, read_controller_epoch
from tierlog.cluster.fencing import ControllerMovedError, FencedWriter
from tierlog.cluster.registration import (
    BrokerIdInUseError,
    RegisteredBroker,
    live_brokers,
    register_broker,
)
from tierlog.cluster.settings import ClusterSettings
from tierlog.cluster.znodes import BrokerRegistration, PartitionState
from tierlog.cluster.zookeeper import ZooKeeperClient
from tierlog.config import Endpoint


@pytest.fixture
def zk_factory(
    cluster_settings: Callable[..., ClusterSettings],
) -> Iterator[Callable[[], ZooKeeperClient]]:
    made: list[ZooKeeperClient] = []

    def make() -> ZooKeeperClient:
        settings = cluster_settings(0)
        client = ZooKeeperClient(settings.zookeeper, settings.session_timeout_ms, 15000)
        client.start()
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def _registration(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "h", 9000 + broker_id),), rack)


def test_registration_appears_and_disappears_with_the_session(
    zk_factory: Callable[[], ZooKeeperClient], kazoo_client: KazooClient
) -> None:
    broker = zk_factory()
    registered = register_broker(broker.kazoo, _registration(1, rack="r1"))
    data, stat = kazoo_client.get(paths.broker(1))
    assert registered.broker_epoch == stat.czxid
    assert stat.ephemeralOwner == broker.session_id
    assert json.loads(data)["rack"] == "r1"
    assert live_brokers(kazoo_client) == {1: _registration(1, rack="r1")}
    again = register_broker(broker.kazoo, _registration(1, rack="r1"))
    assert again.broker_epoch == registered.broker_epoch, "same session: same registration"
    broker.close()
    assert kazoo_client.exists(paths.broker(1)) is None
    assert live_brokers(kazoo_client) == {}


def test_registration_disappears_when_the_session_expires(
    zookeeper: ZooKeeperServer,
    zk_factory: Callable[[], ZooKeeperClient],
    kazoo_client: KazooClient,
) -> None:
    broker = zk_factory()
    first = register_broker(broker.kazoo, _registration(1))
    expire_session(zookeeper.connect, broker.kazoo.client_id)
    wait_until(lambda: kazoo_client.exists(paths.broker(1)) is None, 10, what="expiry")
    wait_until(lambda: broker.kazoo.connected and broker.session_id, 15, what="new session")
    second = register_broker(broker.kazoo, _registration(1))
    assert second.broker_epoch > first.broker_epoch, "a bounced broker has a new epoch"


def test_a_taken_broker_id_is_refused(zk_factory: Callable[[], ZooKeeperClient]) -> None:
    register_broker(zk_factory().kazoo, _registration(5))
    with pytest.raises(BrokerIdInUseError):
        register_broker(zk_factory().kazoo, _registration(5))


def test_two_contenders_elect_exactly_one_controller(
    zk_factory: Callable[[], ZooKeeperClient], kazoo_client: KazooClient
) -> None:
    a, b = zk_factory(), zk_factory()
    lease_a = elect_controller(a.kazoo, 1, 100)
    lease_b = elect_controller(b.kazoo, 2, 100)
    assert lease_a is not None and lease_b is None
    assert lease_a.epoch == 1
    assert read_controller(kazoo_client) == 1
    assert read_controller_epoch(kazoo_client) == (1, lease_a.epoch_zk_version)
    data, stat = kazoo_client.get(paths.CONTROLLER)
    assert json.loads(data) == {"version": 1, "brokerid": 1, "timestamp": "100"}
    assert stat.ephemeralOwner == a.session_id
    assert elect_controller(a.kazoo, 1, 200) == lease_a, "re-electing the holder is a no-op"


def test_racing_contenders_elect_exactly_one(
    zk_factory: Callable[[], ZooKeeperClient], kazoo_client: KazooClient
) -> None:
    """Both read the epoch before either writes: the multi-op lets only one through."""
    clients = [zk_factory() for _ in range(4)]
    epoch, version = read_controller_epoch(kazoo_client)
    results = []
    for i, c in enumerate(clients):
        tx = c.kazoo.transaction()
        tx.create(paths.CONTROLLER, b'{"version":1,"brokerid":%d}' % i, ephemeral=True)
        tx.set_data(paths.CONTROLLER_EPOCH, str(epoch + 1).encode(), version=version)
        results.append(tx.commit())
    winners = [r for r in results if not any(isinstance(x, Exception) for x in r)]
    assert len(winners) == 1
    assert [elect_controller(c.kazoo, i, 0) is not None for i, c in enumerate(clients)] == [
        True,
        False,
        False,
        False,
    ]


def test_controller_epoch_increases_on_failover(
    zk_factory: Callable[[], ZooKeeperClient], kazoo_client: KazooClient
) -> None:
    a, b = zk_factory(), zk_factory()
    first = elect_controller(a.kazoo, 1, 0)
    assert first is not None
    a.close()
    second = elect_controller(b.kazoo, 2, 0)
    assert second is not None
    assert second.epoch == first.epoch + 1
    assert second.epoch_zk_version > first.epoch_zk_version
    assert read_controller(kazoo_client) == 2


def test_a_deposed_controller_cannot_write(
    zookeeper: ZooKeeperServer,
    zk_factory: Callable[[], ZooKeeperClient],
    kazoo_client: KazooClient,
) -> None:
    a, b = zk_factory(), zk_factory()
    old = elect_controller(a.kazoo, 1, 0)
    assert old is not None
    state_path = paths.partition_state("t", 0)
    old_writer = FencedWriter(a.kazoo, old)
    kazoo_client.ensure_path(paths.partition("t", 0))
    old_writer.create(state_path, PartitionState(1, 0, (1, 2), old.epoch).encode())

    # The session of controller 1 expires; broker 2 is elected while 1 still holds its lease.
    expire_session(zookeeper.connect, a.kazoo.client_id)
    wait_until(lambda: read_controller(kazoo_client) is None, 10, what="expiry")
    new = elect_controller(b.kazoo, 2, 0)
    assert new is not None and new.epoch == old.epoch + 1
    wait_until(lambda: a.kazoo.connected, 15, what="controller 1 reconnects")

    stale = PartitionState(1, 1, (1,), old.epoch).encode()
    with pytest.raises(ControllerMovedError):
        old_writer.set_data(state_path, stale)
    with pytest.raises(ControllerMovedError):
        old_writer.create(paths.topic("u"), b"{}")
    with pytest.raises(ControllerMovedError):
        old_writer.delete(state_path)
    state, stat = kazoo_client.get(state_path)
    assert PartitionState.decode(state) == PartitionState(1, 0, (1, 2), old.epoch)
    assert kazoo_client.exists(paths.topic("u")) is None

    new_writer = FencedWriter(b.kazoo, new)
    fresh = PartitionState(2, 1, (2,), new.epoch).encode()
    assert new_writer.set_data(state_path, fresh, version=stat.version).version == stat.version + 1
    with pytest.raises(BadVersionError):
        new_writer.set_data(state_path, fresh, version=stat.version)


def test_registration_waits_out_a_crashed_predecessor(
    zookeeper: ZooKeeperServer,
    zk_factory: Callable[[], ZooKeeperClient],
    kazoo_client: KazooClient,
) -> None:
    """A broker restarted right after kill -9 finds its old znode until that session expires:
    it waits for the znode to go instead of failing."""
    crashed = zk_factory()
    old = register_broker(crashed.kazoo, _registration(6))
    restarted = zk_factory()
    result: list[object] = []
    waiter = threading.Thread(
        target=lambda: result.append(register_broker(restarted.kazoo, _registration(6), 20.0))
    )
    waiter.start()
    wait_until(lambda: kazoo_client.exists(paths.broker(6)) is not None, 5, what="old znode")
    assert not result, "still waiting while the old session lives"
    expire_session(zookeeper.connect, crashed.kazoo.client_id)
    waiter.join(20)
    assert len(result) == 1
    new = result[0]
    assert isinstance(new, RegisteredBroker) and new.broker_epoch > old.broker_epoch
    assert kazoo_client.get(paths.broker(6))[1].ephemeralOwner == restarted.session_id
