"""The internal topics created through ZooKeeper are served by the replication layer at
their real leader epochs: after an election of a ``__transaction_state`` partition (epoch
above 0), its new leader answers its followers' OffsetForLeaderEpoch, ListOffsets and Fetch
at the current epoch (KIP-101, KIP-320), so the surviving follower keeps fetching and the
ISR keeps it. A topic served by the single-node paths knows only epoch 0 and answers
UNKNOWN_LEADER_EPOCH to every follower after the first election."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from kazoo.client import KazooClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.server.txn.schema import coordinator_partition

TOPIC = "__transaction_state"
PARTITIONS = 3
TID = "internal-topic-replication"


def _state(kazoo: KazooClient, p: int) -> PartitionState | None:
    path = paths.partition_state(TOPIC, p)
    if kazoo.exists(path) is None:
        return None
    return PartitionState.decode(kazoo.get(path)[0])


def _start(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo: KazooClient
) -> dict[int, BrokerProcess]:
    brokers = {
        i: broker_factory(
            overrides={
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": "2000",
                "broker.id": str(i),
                "remote.log.storage.system.enable": "false",
                "replica.lag.time.max.ms": "4000",
                "replica.fetch.wait.max.ms": "200",
                "replica.fetch.backoff.ms": "100",
                "transaction.state.log.num.partitions": str(PARTITIONS),
                "transaction.state.log.min.isr": "2",
            }
        )
        for i in (1, 2, 3)
    }
    wait_until(lambda: sorted(live_brokers(kazoo)) == [1, 2, 3], 20, what="all registered")
    return brokers


def _find_coordinator(broker: BrokerProcess) -> bool:
    """FindCoordinator for a transactional id creates ``__transaction_state`` (lazily, as
    Kafka does); True once a coordinator is named."""
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        r = conn.call(ApiKey.FIND_COORDINATOR, 3, key=TID, key_type=1)
    return int(r.error_code) == 0


def _as_follower(
    leader: BrokerProcess, follower_id: int, partition: int, epoch: int
) -> dict[str, int]:
    """The error codes the leader gives the follower ``follower_id`` at ``epoch``, one per
    request a fetcher sends."""
    topics_ofle = [
        {
            "topic": TOPIC,
            "partitions": [
                {"partition": partition, "current_leader_epoch": epoch, "leader_epoch": 0}
            ],
        }
    ]
    with WireConnection.to_bootstrap(leader.bootstrap) as conn:
        ofle = conn.call(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, replica_id=follower_id, topics=topics_ofle
        )
        listed = conn.call(
            ApiKey.LIST_OFFSETS,
            7,
            replica_id=follower_id,
            isolation_level=0,
            topics=[
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "current_leader_epoch": epoch,
                            "timestamp": -1,
                        }
                    ],
                }
            ],
        )
        fetched = conn.call(
            ApiKey.FETCH,
            12,
            replica_id=follower_id,
            max_wait=datetime.timedelta(milliseconds=0),
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": TOPIC,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": epoch,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": 0,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
    return {
        "offset_for_leader_epoch": int(ofle.topics[0].partitions[0].error_code),
        "list_offsets": int(listed.topics[0].partitions[0].error_code),
        "fetch": int(fetched.responses[0].partitions[0].error_code),
    }


def _init_producer_id(broker: BrokerProcess) -> int:
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        r = conn.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            transactional_id=TID,
            transaction_timeout=datetime.timedelta(milliseconds=10000),
            producer_id=-1,
            producer_epoch=-1,
        )
    return int(r.error_code)


def test_transaction_state_followers_keep_fetching_after_an_election(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = _start(broker_factory, zk_connect, kazoo_client)
    wait_until(lambda: _find_coordinator(brokers[1]), 30, what="__transaction_state created")
    p = coordinator_partition(TID, PARTITIONS)

    def full() -> PartitionState | None:
        s = _state(kazoo_client, p)
        return s if s is not None and len(s.isr) == 3 else None

    def elected() -> PartitionState | None:
        s = _state(kazoo_client, p)
        return s if s is not None and s.leader not in (-1, before.leader) else None

    before = wait_until(full, 30, what="a full ISR")
    brokers[before.leader].kill()
    after = wait_until(elected, 30, what="a new leader")
    assert after.leader_epoch > before.leader_epoch
    leader = brokers[after.leader]
    follower = next(r for r in after.isr if r != after.leader)

    none = {"offset_for_leader_epoch": 0, "list_offsets": 0, "fetch": 0}
    wait_until(
        lambda: _as_follower(leader, follower, p, after.leader_epoch) == none,
        10,
        0.2,
        what="the new leader answering its follower at its epoch",
    )
    wait_until(
        lambda: _init_producer_id(leader) == ErrorCode.NONE,
        30,
        0.2,
        what="InitProducerId written with transaction.state.log.min.isr 2",
    )
    final = _state(kazoo_client, p)
    assert final is not None and final.leader == after.leader and follower in final.isr
