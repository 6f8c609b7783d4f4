"""The transaction coordinator in a three-broker cluster: ``__transaction_state`` is created
through ZooKeeper with ``transaction.state.log.replication.factor``, the coordinator of a
transactional id is the leader of its partition (FindCoordinator key type 1, from every
broker), produce verification asks it over the wire (KIP-890), and markers go over the wire
to each partition's leader, so that read_committed sees the committed transaction only; and a
transaction in flight when its coordinator is killed with kill -9 completes or aborts whole."""

from __future__ import annotations

from collections.abc import Callable

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import bootstrap, start_cluster
from tests.helpers.poll import wait_until
from tests.helpers.txn_clients import read_all
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.znodes import PartitionState
from tierlog.protocol.api_keys import ApiKey
from tierlog.server.txn.schema import TRANSACTION_STATE_TOPIC, coordinator_partition

TXN_PARTITIONS = 3
TOPIC = "tx-orders"
PARTITIONS = 3
TID = "cluster-tx"


def _start(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo: KazooClient,
    extra: dict[str, str] | None = None,
) -> dict[int, BrokerProcess]:
    """Three brokers with small ``__consumer_offsets`` and ``__transaction_state`` topics."""
    small = {
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    }
    return start_cluster(broker_factory, zk_connect, kazoo, extra={**small, **(extra or {})})


_bootstrap = bootstrap


def _txn_state(kazoo: KazooClient, p: int) -> PartitionState | None:
    path = paths.partition_state(TRANSACTION_STATE_TOPIC, p)
    if kazoo.exists(path) is None:
        return None
    return PartitionState.decode(kazoo.get(path)[0])


def _full_isr(kazoo: KazooClient, p: int) -> PartitionState | None:
    s = _txn_state(kazoo, p)
    return s if s is not None and len(s.isr) == 3 else None


def _find(broker: BrokerProcess, tid: str) -> tuple[int, int]:
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        r = conn.call(ApiKey.FIND_COORDINATOR, 3, key=tid, key_type=1)
    return int(r.error_code), int(r.node_id)


def _producer(brokers: dict[int, BrokerProcess]) -> ck.Producer:
    p = ck.Producer(
        {
            "bootstrap.servers": _bootstrap(brokers),
            "transactional.id": TID,
            "transaction.timeout.ms": 10000,
            "linger.ms": 5,
        }
    )
    p.init_transactions(60)
    return p


def test_coordinator_is_the_partition_leader_and_markers_reach_every_leader(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = _start(broker_factory, zk_connect, kazoo_client)
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    futures = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
        operation_timeout=15,
    )
    futures[TOPIC].result(30)

    producer = _producer(brokers)
    p = coordinator_partition(TID, TXN_PARTITIONS)
    state = wait_until(lambda: _full_isr(kazoo_client, p), 30, what="the txn partition's ISR")
    for b in brokers.values():
        assert _find(b, TID) == (0, state.leader)

    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, b"aborted-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    producer.abort_transaction(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, b"committed-%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(60)

    expected = sorted(b"committed-%d" % i for i in range(30))
    got = read_all(_bootstrap(brokers), TOPIC, "read_committed", len(expected), PARTITIONS)
    assert sorted(got) == expected
    everything = read_all(_bootstrap(brokers), TOPIC, "read_uncommitted", 60, PARTITIONS)
    assert len(everything) == 60


def _new_leader(kazoo: KazooClient, p: int, old: int) -> PartitionState | None:
    s = _txn_state(kazoo, p)
    return s if s is not None and s.leader not in (-1, old) else None


def test_a_transaction_in_flight_survives_kill_9_of_its_coordinator(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """The coordinator is killed between the transaction's writes and its commit: the new
    coordinator finishes it (commit or abort, as a whole), and the producer goes on, with
    min.insync.replicas 2 for the transaction log and the topic: the surviving follower of
    the new leader keeps fetching, so the ISR keeps two members."""
    brokers = _start(
        broker_factory, zk_connect, kazoo_client, {"transaction.state.log.min.isr": "2"}
    )
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    futures = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
        operation_timeout=15,
    )
    futures[TOPIC].result(30)
    producer = _producer(brokers)
    p = coordinator_partition(TID, TXN_PARTITIONS)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, b"first-%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(60)

    coordinator = wait_until(lambda: _full_isr(kazoo_client, p), 30, what="a full ISR").leader
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, b"second-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    brokers[coordinator].kill()
    second_committed = True
    try:
        producer.commit_transaction(90)
    except ck.KafkaException as e:
        second_committed = False
        if e.args[0].txn_requires_abort():
            producer.abort_transaction(90)
        else:
            producer = _producer({k: v for k, v in brokers.items() if v.running})
    wait_until(lambda: _new_leader(kazoo_client, p, coordinator), 30, what="a new coordinator")
    producer.begin_transaction()
    producer.produce(TOPIC, b"third", partition=0)
    producer.commit_transaction(60)

    expected = {b"first-%d" % i for i in range(30)} | {b"third"}
    if second_committed:
        expected |= {b"second-%d" % i for i in range(30)}
    live = {k: v for k, v in brokers.items() if v.running}
    got = read_all(_bootstrap(live), TOPIC, "read_committed", len(expected), PARTITIONS)
    assert sorted(got) == sorted(expected)
