"""Fixtures for cluster coordination tests: one real ZooKeeper server per test session.

* ``zookeeper``: the session's ``ZooKeeperServer`` (started on first use, stopped at the end).
* ``zk_connect``: a ``zookeeper.connect`` string with a chroot of its own for each test, so
  tests share the server but never each other's znodes. The chroot does not exist yet:
  creating it is the client's job, as in Kafka.
* ``kazoo_client``: a plain kazoo client on that chroot (created), to inspect and disturb.
* ``cluster_settings(broker_id, rack=None)``: the ``ClusterSettings`` of a broker on that
  chroot, with a 2 s session timeout.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from helpers.zookeeper import ZooKeeperServer, zookeeper_available
from tierlog.cluster.settings import ClusterSettings
from tierlog.config import Endpoint
from tierlog.config.zookeeper_connect import parse_zookeeper_connect

_chroots = itertools.count()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    if not zookeeper_available():
        pytest.fail("ZooKeeper is not installed: run `make install` (as root)")
    server = ZooKeeperServer(Path(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    name = "".join(c if c.isalnum() else "_" for c in request.node.name)[:60]
    return f"{zookeeper.connect}/tests/{name}_{next(_chroots)}"


@pytest.fixture
def kazoo_client(zk_connect: str) -> Iterator[KazooClient]:
    hosts, chroot = zk_connect.split("/", 1)
    root = KazooClient(hosts=hosts)
    root.start(timeout=15)
    root.ensure_path("/" + chroot)
    root.stop()
    root.close()
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def cluster_settings(zk_connect: str) -> Callable[..., ClusterSettings]:
    def make(broker_id: int, rack: str | None = None) -> ClusterSettings:
        return ClusterSettings(
            broker_id=broker_id,
            zookeeper=parse_zookeeper_connect(zk_connect),
            session_timeout_ms=2000,
            connection_timeout_ms=15000,
            advertised_listeners=(Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),),
            rack=rack,
        )

    return make
