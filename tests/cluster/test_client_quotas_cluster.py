"""Client quotas in a cluster live in Kafka's znodes: a quota set through one broker is
written to ``/config/clients/<id>`` with a ``/config/changes`` notification naming it, and
the other broker, following the notifications, throttles that client; a change written
straight into ZooKeeper, as Kafka's own tools do, is applied the same way."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from kazoo.client import KazooClient

from tests.helpers import client_quotas as cq
from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until

RATE = 64 * 1024
WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


def _notified_paths(kazoo: KazooClient) -> list[str]:
    out = []
    for name in sorted(kazoo.get_children("/config/changes")):
        data, _ = kazoo.get(f"/config/changes/{name}")
        assert name.startswith("config_change_")
        out.append(json.loads(data)["entity_path"])
    return out


def _throttled(b: BrokerProcess, topic: str, client_id: str) -> bool:
    return cq.produce_throttle_ms(b.host_port, topic, client_id, 3 * RATE) > 0


def test_a_quota_set_through_one_broker_is_enforced_by_the_other(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, n=2, extra=WINDOW)
    c.create_topic(brokers, kazoo_client, "metered", [[2]])
    first, second = brokers[1], brokers[2]
    wait_until(
        lambda: cq.produce_answer(second.host_port, "metered", "warm-up", 10)[0] == 0,
        20,
        what="broker 2 leading metered-0",
    )
    assert not _throttled(second, "metered", "limited")

    assert cq.alter(first.bootstrap, {"client-id": "limited"}, {"producer_byte_rate": RATE}) == (
        0,
        None,
    )
    data, _ = kazoo_client.get("/config/clients/limited")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": str(RATE)}}
    assert "clients/limited" in _notified_paths(kazoo_client)
    limited = (("client-id", "limited"),)
    assert cq.describe(second.bootstrap)[2] == {limited: {"producer_byte_rate": float(RATE)}}
    wait_until(partial(_throttled, second, "metered", "limited"), 10, what="broker 2 throttles")
    assert not _throttled(second, "metered", "unlimited")

    # user/client pairs go below the user, as Kafka writes them
    pair = {"user": "ANONYMOUS", "client-id": "pair"}
    assert cq.alter(first.bootstrap, pair, {"producer_byte_rate": RATE}) == (0, None)
    data, _ = kazoo_client.get("/config/users/ANONYMOUS/clients/pair")
    assert json.loads(data)["config"] == {"producer_byte_rate": str(RATE)}
    wait_until(partial(_throttled, second, "metered", "pair"), 10, what="the pair throttled")

    # what kafka-configs.sh --zookeeper writes: the entity znode, then a notification
    kazoo_client.create(
        "/config/clients/direct",
        json.dumps({"version": 1, "config": {"producer_byte_rate": str(RATE)}}).encode(),
        makepath=True,
    )
    kazoo_client.create(
        "/config/changes/config_change_",
        json.dumps({"version": 2, "entity_path": "clients/direct"}).encode(),
        sequence=True,
    )
    wait_until(partial(_throttled, second, "metered", "direct"), 10, what="direct change")

    # removing the key lifts the quota on the other broker too
    assert cq.alter(first.bootstrap, {"client-id": "limited"}, remove=["producer_byte_rate"]) == (
        0,
        None,
    )
    data, _ = kazoo_client.get("/config/clients/limited")
    assert json.loads(data) == {"version": 1, "config": {}}
    wait_until(lambda: not _throttled(second, "metered", "limited"), 10, what="the quota lifted")


def test_the_controller_holds_topic_creation_to_a_controller_mutation_rate(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """KIP-599 in a cluster: a default ``controller_mutation_rate`` set through one broker is
    enforced by the controller, where CreateTopics and DeleteTopics are served. Each client id
    has a bucket of its own (2 partitions at 1 per second): a strict CreateTopics (v7) whose
    first topic takes the bucket to -8 has its second refused, and so has the same client's
    DeleteTopics (v6) on another connection."""
    from tierlog.client import WireConnection
    from tierlog.protocol.api_keys import ApiKey

    window = {"controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"}
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, n=2, extra=window)
    controller = brokers[c.controller_of(kazoo_client)]
    other = next(b for b in brokers.values() if b is not controller)
    assert cq.alter(other.bootstrap, {"client-id": None}, {"controller_mutation_rate": 1}) == (
        0,
        None,
    )
    probes = iter(range(1000))

    def refused_once_spent() -> str | None:
        """A new client's request; its id once the controller refused the second topic."""
        client = f"admin-{next(probes)}"
        with WireConnection(*controller.host_port, client_id=client) as conn:
            r = conn.call(
                ApiKey.CREATE_TOPICS,
                7,
                topics=[
                    {
                        "name": f"{client}-{n}",
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                    for n, partitions in ((0, 10), (1, 1))
                ],
                timeout=30_000,
                validate_only=False,
            )
        codes = [int(t.error_code) for t in r.topics]
        assert codes[0] == 0
        return client if codes[1] == 89 else None

    client = wait_until(refused_once_spent, 20, what="the controller applying the quota")
    with WireConnection(*controller.host_port, client_id=client) as conn:
        r = conn.call(
            ApiKey.DELETE_TOPICS,
            6,
            topics=[{"name": f"{client}-0", "topic_id": None}],
            timeout=30_000,
        )
    assert int(r.responses[0].error_code) == 89
