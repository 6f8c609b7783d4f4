"""The ZooKeeper client wrapper: chroot created as Kafka does, persistent roots, and session
events that tell a new session (ephemerals gone) from a resumed one."""

from __future__ import annotations

import queue
import time

import pytest
from kazoo.client import KazooClient

from helpers.zookeeper import ZooKeeperServer, expire_session
from tierlog.cluster import paths
from tierlog.cluster.zookeeper import SessionEvent, ZooKeeperClient
from tierlog.config.zookeeper_connect import parse_zookeeper_connect


def test_creates_missing_chroot_and_persistent_roots(
    zookeeper: ZooKeeperServer, zk_connect: str
) -> None:
    chroot = parse_zookeeper_connect(zk_connect).chroot
    assert chroot is not None
    client = ZooKeeperClient(parse_zookeeper_connect(zk_connect), 2000, 15000)
    client.start()
    try:
        client.kazoo.create("/probe", b"1")
        root = KazooClient(hosts=zookeeper.connect)
        root.start(timeout=15)
        try:
            assert root.get(f"{chroot}/probe")[0] == b"1"
            for path in paths.PERSISTENT_ROOTS:
                assert root.exists(chroot + path), path
        finally:
            root.stop()
            root.close()
    finally:
        client.close()


def test_session_events(zookeeper: ZooKeeperServer, zk_connect: str) -> None:
    events: queue.Queue[SessionEvent] = queue.Queue()
    client = ZooKeeperClient(parse_zookeeper_connect(zk_connect), 2000, 15000)
    client.add_session_listener(events.put)
    client.start()
    try:
        assert events.get(timeout=10) is SessionEvent.NEW_SESSION
        first = client.session_id
        client.kazoo.create("/mine", b"", ephemeral=True)
        expire_session(zookeeper.connect, client.kazoo.client_id)
        seen = []
        while SessionEvent.NEW_SESSION not in seen:
            seen.append(events.get(timeout=15))
        assert SessionEvent.LOST in seen
        assert client.session_id not in (None, first)
        assert client.kazoo.exists("/mine") is None
    finally:
        client.close()


def test_an_unreachable_zookeeper_fails_start_within_the_connection_timeout() -> None:
    from helpers.zookeeper import free_port
    from tierlog.cluster.zookeeper import ZooKeeperUnavailableError

    connect = parse_zookeeper_connect(f"127.0.0.1:{free_port()}/chroot")
    client = ZooKeeperClient(connect, 2000, 1000)
    started = time.monotonic()
    with pytest.raises(ZooKeeperUnavailableError):
        client.start()
    assert time.monotonic() - started < 10
