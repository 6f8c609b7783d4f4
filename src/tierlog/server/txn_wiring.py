"""Building the transaction coordinator from broker config, and its ``__transaction_state``.

Kept apart from ``broker.py`` so the choices made here (the topic's forced configs, where
markers go, where producer ids come from) are in one place. Single-node mode: this broker
leads every ``__transaction_state`` partition at coordinator epoch 0, so all are loaded before
the coordinator is published, and every marker goes over the wire to this broker's own
listener (the same path a cluster takes). Cluster mode: ``build_cluster_txn_coordinator``.
"""

from __future__ import annotations

import asyncio

from tierlog.cluster.znodes import NO_LEADER
from tierlog.config.broker import BrokerConfig
from tierlog.log import PartitionLog
from tierlog.replication.manager import ReplicaManager
from tierlog.replication.wire import BrokerConnection
from tierlog.server.auto_topics import AutoTopics
from tierlog.server.group.cluster_placement import ClusterPlacement
from tierlog.server.group.model import TopicPartition
from tierlog.server.state import LEADER_EPOCH, BrokerState
from tierlog.server.txn.config import TxnCoordinatorConfig
from tierlog.server.txn.coordinator import TxnCoordinator
from tierlog.server.txn.log_store import TxnLogStore
from tierlog.server.txn.markers import Connection, Destination, MarkerChannel, Resolve, Unknown
from tierlog.server.txn.replicated_store import ReplicatedTxnLogStore
from tierlog.server.txn.schema import TRANSACTION_STATE_TOPIC
from tierlog.server.txn.verifier import CoordinatorVerifier

CLIENT_ID = "tierlog-txn-markers"
CONNECT_TIMEOUT_S = 10.0


def transaction_state_configs(cfg: BrokerConfig) -> dict[str, str]:
    """Kafka's forced configs of ``__transaction_state``: compacted (ids expire as
    tombstones), uncompressed, ``transaction.state.log.segment.bytes`` segments, and
    ``transaction.state.log.min.isr``."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "segment.bytes": str(int(cfg.get("transaction.state.log.segment.bytes"))),
        "min.insync.replicas": str(int(cfg.get("transaction.state.log.min.isr"))),
        "unclean.leader.election.enable": "false",
    }


def coordinator_config(cfg: BrokerConfig, partitions: int) -> TxnCoordinatorConfig:
    return TxnCoordinatorConfig(
        max_timeout_ms=int(cfg.get("transaction.max.timeout.ms")),
        id_expiration_ms=int(cfg.get("transactional.id.expiration.ms")),
        abort_timed_out_interval_ms=int(
            cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        ),
        remove_expired_interval_ms=int(
            cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms")
        ),
        state_log_num_partitions=partitions,
        offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
    )


async def _connect(dest: Destination) -> Connection:
    return await BrokerConnection.open(dest.host, dest.port, CLIENT_ID, CONNECT_TIMEOUT_S)


async def build_txn_coordinator(state: BrokerState) -> TxnCoordinator:
    """The single-node coordinator, every partition loaded and its timers running."""
    cfg = state.config
    topics = state.topics
    info = topics.ensure(
        TRANSACTION_STATE_TOPIC,
        int(cfg.get("transaction.state.log.num.partitions")),
        transaction_state_configs(cfg),
    )

    def log_for(partition: int) -> PartitionLog:
        plog: PartitionLog | None = topics.get_log(TRANSACTION_STATE_TOPIC, partition)
        if plog is None:
            raise KeyError(f"{TRANSACTION_STATE_TOPIC}-{partition} does not exist")
        return plog

    host, port = state.advertised
    me = Destination(state.node_id, host, port)

    def resolve(tp: TopicPartition) -> Destination | Unknown | None:
        return me if topics.get_log(tp.topic, tp.partition) is not None else None

    async def allocate() -> int:
        return await asyncio.to_thread(state.producer_ids.allocate)

    coordinator = TxnCoordinator(
        config=coordinator_config(cfg, info.partitions),
        store=TxnLogStore(
            log_for,
            leader_epoch_for=lambda _p: LEADER_EPOCH,
            load_buffer_bytes=int(cfg.get("transaction.state.log.load.buffer.size")),
        ),
        markers=MarkerChannel(resolve, _connect),
        allocate_producer_id=allocate,
    )
    for partition in range(info.partitions):
        await coordinator.load(partition, LEADER_EPOCH)
    coordinator.start()
    return coordinator


def _cluster_resolve(replication: ReplicaManager) -> Resolve:
    """A partition's leader from this broker's cluster view: None once its topic is gone,
    ``Unknown.ENDPOINT`` while the partition or its live leader is not in the view."""

    def resolve(tp: TopicPartition) -> Destination | Unknown | None:
        view = replication.view
        if view is None:
            return Unknown.ENDPOINT
        if tp.topic not in view.topics():
            return None
        info = view.partition(tp.topic, tp.partition)
        if info is None:
            return Unknown.ENDPOINT
        leader = NO_LEADER if info.state is None else info.state.leader
        broker = view.brokers().get(leader)
        if broker is None or not broker.registration.endpoints:
            return Unknown.ENDPOINT
        endpoint = broker.registration.endpoints[0]
        return Destination(leader, endpoint.host or "127.0.0.1", endpoint.port)

    return resolve


def build_cluster_txn_coordinator(
    state: BrokerState, replication: ReplicaManager
) -> TxnCoordinator:
    """Cluster mode: ``__transaction_state`` is a cluster topic, created through ZooKeeper on
    the first FindCoordinator for a transactional id with
    ``transaction.state.log.replication.factor``; the coordinator loads a partition when this
    broker becomes its leader and drops it when it stops; writes wait for the ISR."""
    cfg = state.config
    topics = state.topics
    partitions = int(cfg.get("transaction.state.log.num.partitions"))

    def log_for(partition: int) -> PartitionLog:
        plog: PartitionLog | None = topics.get_log(TRANSACTION_STATE_TOPIC, partition)
        if plog is None:
            raise KeyError(f"{TRANSACTION_STATE_TOPIC}-{partition} has no local replica")
        return plog

    coordinator = TxnCoordinator(
        config=coordinator_config(cfg, partitions),
        store=ReplicatedTxnLogStore(
            replication,
            log_for,
            load_buffer_bytes=int(cfg.get("transaction.state.log.load.buffer.size")),
        ),
        markers=MarkerChannel(_cluster_resolve(replication), _connect),
        allocate_producer_id=replication.allocate_producer_id,
        placement=ClusterPlacement(
            replication,
            AutoTopics(replication),
            partitions,
            int(cfg.get("transaction.state.log.replication.factor")),
            transaction_state_configs(cfg),
            topic=TRANSACTION_STATE_TOPIC,
        ),
    )
    coordinator.start()
    replication.add_leadership_listener(TRANSACTION_STATE_TOPIC, coordinator)
    return coordinator


async def start_transactions(state: BrokerState) -> None:
    """Install the group coordinator as the listener of markers (its transactional offsets),
    KIP-890 verification (unless disabled) and, in single-node mode, the
    coordinator; cluster mode's coordinator follows leadership of ``__transaction_state``."""
    state.txn_marker_listener = state.groups
    if state.config.get("transaction.partition.verification.enable"):
        state.txn_verifier = CoordinatorVerifier(lambda: state.txn, _connect)
    if state.replication is None:
        state.txn = await build_txn_coordinator(state)
    else:
        state.txn = build_cluster_txn_coordinator(state, state.replication)


async def close_transactions(state: BrokerState) -> None:
    """Stop the coordinator (its timers and marker channel) and the verifier's connections."""
    if state.txn is not None:
        await state.txn.close()
    if isinstance(state.txn_verifier, CoordinatorVerifier):
        await state.txn_verifier.close()
