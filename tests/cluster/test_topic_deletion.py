"""Cluster-wide topic deletion driven by the controller (spec Z-20, Z-21), on real brokers:
every replica's local files go, and the deletion completes while a replica is offline, which
removes its files when it comes back."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.cluster import paths


def _gone(b: BrokerProcess) -> bool:
    return not (b.log_dir / "doomed-0").exists() and not (b.log_dir / "doomed-1").exists()


def test_delete_topic_removes_every_replica_even_with_one_offline(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client)
    c.create_topic(brokers, kazoo_client, "doomed", [[1, 2, 3], [2, 3, 1]])
    c.create_topic(brokers, kazoo_client, "kept", [[1, 2, 3]])
    c.produce(c.bootstrap(brokers), "doomed", [b"x%d" % i for i in range(20)])
    offline_id = max(i for i in brokers if i != c.controller_of(kazoo_client))
    offline = brokers[offline_id]
    dirs = [offline.log_dir / "doomed-0", offline.log_dir / "doomed-1"]
    assert all(d.is_dir() for d in dirs)
    offline.stop()

    admin = AdminClient({"bootstrap.servers": c.bootstrap(brokers)})
    admin.delete_topics(["doomed"], operation_timeout=20)["doomed"].result(30)
    for path in (
        paths.topic("doomed"),
        paths.topic_config("doomed"),
        paths.delete_topic_request("doomed"),
    ):
        assert kazoo_client.exists(path) is None, path
    for i, b in brokers.items():
        if i != offline_id:
            wait_until(
                partial(_gone, b),
                20,
                what=f"broker {i}'s replicas removed",
            )
    assert all(d.is_dir() for d in dirs), "the offline replica is untouched while down"
    assert "doomed" not in admin.list_topics(timeout=10).topics
    led: list[int] = []
    for i, b in brokers.items():
        if i != offline_id:
            found = re.search(
                r"doomed: deleted from the cluster.*\(leader of \[([\d, ]*)\]\)", b.stderr
            )
            assert found is not None, f"broker {i} saw the deletion"
            led += [int(x) for x in found.group(1).split(",") if x.strip()]
    assert sorted(led) == [0, 1], "the stop hook runs once per partition, on its leader"

    offline.start()
    wait_until(lambda: not any(d.exists() for d in dirs), 30, what="removed on its return")
    assert (offline.log_dir / "kept-0").is_dir()
    c.produce(c.bootstrap(brokers), "kept", [b"still here"])
    assert "doomed: deleted from the cluster; removing the local replicas (leader of [])" in (
        offline.stderr
    )


def test_a_topic_re_created_while_a_replica_was_down_replaces_its_old_files(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """A broker down while its topic was deleted and created again under the same name finds
    on its return a topic id different from its local one: it deletes the old replica and
    follows the new topic, whose records it then holds, not the old ones."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client)
    offline_id = max(i for i in brokers if i != c.controller_of(kazoo_client))
    c.create_topic(brokers, kazoo_client, "again", [[1, 2, 3]])
    c.produce(c.bootstrap(brokers), "again", [b"old generation"])
    offline = brokers[offline_id]
    wait_until(lambda: b"old generation" in _log_bytes(offline), 20, what="replicated")
    offline.stop()
    admin = AdminClient({"bootstrap.servers": c.bootstrap(brokers)})
    admin.delete_topics(["again"], operation_timeout=20)["again"].result(30)
    live = [i for i in brokers if i != offline_id]
    c.create_topic({i: brokers[i] for i in live}, kazoo_client, "again", [live])
    c.produce(c.bootstrap(brokers), "again", [b"new generation"])
    offline.start()
    wait_until(lambda: b"old generation" not in _log_bytes(offline), 30, what="old replica removed")
    assert "again: deleted from the cluster" in offline.stderr
    assert c.consume(c.bootstrap(brokers), "again", 0, 1) == [b"new generation"]


def _log_bytes(b: BrokerProcess) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((b.log_dir / "again-0").glob("*.log")))
