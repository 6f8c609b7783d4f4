"""The fixture's ZooKeeper is a real server that clients can use."""

from __future__ import annotations

from kazoo.client import KazooClient

from helpers.zookeeper import ZooKeeperServer, four_letter_word


def test_server_answers_and_stores_znodes(
    zookeeper: ZooKeeperServer, kazoo_client: KazooClient
) -> None:
    assert four_letter_word(zookeeper.port, "ruok") == "imok"
    assert "Zookeeper version: 3.8" in four_letter_word(zookeeper.port, "srvr")
    kazoo_client.create("/probe", b"x")
    assert kazoo_client.get("/probe")[0] == b"x"
