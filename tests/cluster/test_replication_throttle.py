"""Replication throttles (KIP-73) on real brokers: a reassignment that adds a replica, with
``leader/follower.replication.throttled.replicas`` set on the topic and the throttled rates
set as a cluster-wide dynamic default, catches up no faster than the rate allows, while an
in-sync replica of a throttled topic keeps replicating at full speed; removing the rate
lets the catch-up finish; ``tierlog reassign-partitions --throttle`` sets the same configs
as Kafka's tool, and ``--verify`` removes them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey

RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
RECORD = 1000
#: Small replica fetches, so one response is a small part of what a throttle allows.
EXTRA = {"replica.fetch.max.bytes": "16384", "replica.fetch.response.max.bytes": "16384"}


def _set_rates(b: BrokerProcess, rate: int | None) -> None:
    """The cluster-wide default of both rates (``None``: delete them), as
    ``kafka-reassign-partitions.sh --throttle`` sets them per broker."""
    op, value = (0, str(rate)) if rate is not None else (1, None)
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [{"name": k, "config_operation": op, "value": value} for k in RATES],
                }
            ],
            validate_only=False,
        )
    assert int(r.responses[0].error_code) == 0, r.responses[0].error_message


def _throttle_topic(admin: AdminClient, topic: str, leader: str, follower: str) -> None:
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "leader.replication.throttled.replicas",
                leader,
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "follower.replication.throttled.replicas",
                follower,
                incremental_operation=AlterConfigOpType.SET,
            ),
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)


def _produce(bootstrap: str, topic: str, total: int) -> None:
    """``total`` bytes of values in small batches (acks=all)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 8192}
    )
    failed: list[str] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for i in range(total // RECORD):
        producer.produce(topic, bytes([i % 251]) * RECORD, partition=0, on_delivery=done)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed[:3]


def _reassign(b: BrokerProcess, topic: str, replicas: list[int]) -> None:
    with WireConnection.to_bootstrap(b.bootstrap) as conn:
        r = conn.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            timeout=10000,
            topics=[{"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}],
        )
    assert int(r.error_code) == 0 and int(r.responses[0].partitions[0].error_code) == 0


def _in_isr(kazoo: KazooClient, topic: str, broker_id: int) -> bool:
    s = c.state(kazoo, topic)
    return s is not None and broker_id in s.isr


def _start(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo: KazooClient, size: int
) -> tuple[dict[int, BrokerProcess], BrokerProcess, AdminClient]:
    """Two brokers, topic ``moving`` on broker 1 only holding ``size`` bytes, throttled on
    both sides for the replica broker 2 will add."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo, n=2, extra=EXTRA)
    c.create_topic(brokers, kazoo, "moving", [[1]])
    _produce(brokers[1].bootstrap, "moving", size)
    admin = AdminClient({"bootstrap.servers": c.bootstrap(brokers)})
    _throttle_topic(admin, "moving", "0:1", "0:2")
    return brokers, brokers[c.controller_of(kazoo)], admin


def test_a_throttled_catch_up_takes_at_least_size_over_rate_and_in_sync_replicas_are_not_throttled(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    size, rate = 150_000, 60_000
    brokers, controller, admin = _start(broker_factory, zk_connect, kazoo_client, size)
    c.create_topic(brokers, kazoo_client, "steady", [[1, 2]])
    _throttle_topic(admin, "steady", "*", "*")
    _set_rates(brokers[1], rate)

    started = time.monotonic()
    _reassign(controller, "moving", [1, 2])
    wait_until(
        lambda: brokers[1].metric("tierlog_replication_throttled_rate_bytes", side="leader") > 0,
        10,
        what="the catch-up measured by the leader throttle",
    )
    # while the catch-up is held back, the in-sync follower of a throttled topic is not
    steady_started = time.monotonic()
    _produce(brokers[1].bootstrap, "steady", size)
    steady_s = time.monotonic() - steady_started
    assert not _in_isr(kazoo_client, "moving", 2), "caught up before the in-sync produce ended"

    wait_until(partial(_in_isr, kazoo_client, "moving", 2), 60, what="2 in the ISR")
    elapsed = time.monotonic() - started
    floor = 0.8 * size / rate  # the rate's first window and one fetch may run ahead
    assert elapsed >= floor, f"caught up in {elapsed:.1f}s, faster than the throttle allows"
    # throttled, the in-sync follower would get its ``size`` bytes no faster than the rate
    assert steady_s < floor, f"the in-sync replica took {steady_s:.1f}s: it was throttled"
    assert brokers[1].metric("tierlog_replication_throttled_bytes_total", side="leader") >= size
    assert brokers[2].metric("tierlog_replication_throttled_bytes_total", side="follower") > 0


def test_removing_the_throttle_lets_the_catch_up_finish(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    size, rate = 400_000, 20_000
    brokers, controller, _admin = _start(broker_factory, zk_connect, kazoo_client, size)
    _set_rates(brokers[1], rate)

    _reassign(controller, "moving", [1, 2])
    wait_until(
        lambda: brokers[2].metric("tierlog_log_end_offset", topic="moving", partition="0") > 0,
        10,
        what="the new replica fetching",
    )
    assert not _in_isr(kazoo_client, "moving", 2)  # 20 s of data at this rate

    _set_rates(brokers[1], None)
    removed = time.monotonic()
    wait_until(partial(_in_isr, kazoo_client, "moving", 2), 15, what="2 in the ISR")
    assert time.monotonic() - removed < size / rate / 2


def _znode_config(kazoo: KazooClient, path: str) -> dict[str, str]:
    return dict(json.loads(kazoo.get(path)[0])["config"])


def test_reassign_partitions_throttle_sets_and_verify_removes_kafkas_configs(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> None:
    """``tierlog reassign-partitions --execute --throttle`` writes the configs Kafka's tool
    writes (the topic's throttled replicas, each involved broker's rates), the move honours
    them, and ``--verify`` after it completed removes them."""
    size, rate = 150_000, 50_000
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, n=2, extra=EXTRA)
    c.create_topic(brokers, kazoo_client, "moving", [[1]])
    _produce(brokers[1].bootstrap, "moving", size)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [1, 2]}]}
        )
    )
    args = [
        "reassign-partitions",
        "--bootstrap-server",
        c.bootstrap(brokers),
        "--reassignment-json-file",
        str(plan),
    ]

    started = time.monotonic()
    r = c.run_cli(*args, "--execute", "--throttle", str(rate))
    assert r.returncode == 0, r.stderr
    assert "The inter-broker throttle limit was set to 50000 B/s" in r.stdout
    for broker_id in (1, 2):
        assert _znode_config(kazoo_client, f"/config/brokers/{broker_id}") == {
            "leader.replication.throttled.rate": str(rate),
            "follower.replication.throttled.rate": str(rate),
        }
    topic_config = _znode_config(kazoo_client, "/config/topics/moving")
    assert topic_config["leader.replication.throttled.replicas"] == "0:1"
    assert topic_config["follower.replication.throttled.replicas"] == "0:2"

    wait_until(partial(_in_isr, kazoo_client, "moving", 2), 60, what="2 in the ISR")
    assert time.monotonic() - started >= 0.8 * size / rate

    def verified() -> str | None:
        out = c.run_cli(*args, "--verify").stdout
        return out if "Reassignment of partition moving-0 is completed." in out else None

    out = wait_until(verified, 30, interval_s=0.2, what="the move completed")
    assert "Throttle was removed." in out
    for broker_id in (1, 2):
        assert _znode_config(kazoo_client, f"/config/brokers/{broker_id}") == {}
    topic_config = _znode_config(kazoo_client, "/config/topics/moving")
    assert not set(topic_config) & {
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
