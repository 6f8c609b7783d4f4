"""Building the transaction coordinator from broker config, and its ``__transaction_state``.

Kept apart from ``broker.py`` so the choices made here (the topic's forced configs, where
markers go, where producer ids come from) are in one place. Single-node mode: this broker
leads every ``__transaction_state`` partition at coordinator epoch 0, so all are loaded before
the coordinator is published, and every marker goes over the wire to this broker's own
listener (the same path a cluster takes).
"""

from __future__ import annotations

import asyncio

from tierlog.config.broker import BrokerConfig
from tierlog.log import PartitionLog
from tierlog.replication.wire import BrokerConnection
from tierlog.server.group.model import TopicPartition
from tierlog.server.state import LEADER_EPOCH, BrokerState
from tierlog.server.txn.config import TxnCoordinatorConfig
from tierlog.server.txn.coordinator import TxnCoordinator
from tierlog.server.txn.log_store import TxnLogStore
from tierlog.server.txn.markers import Connection, Destination, MarkerChannel, Unknown
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


async def start_transactions(state: BrokerState) -> None:
    """Install the group coordinator as the listener of markers (its transactional offsets),
    KIP-890 verification (unless disabled) and, in single-node mode, the
    coordinator; cluster mode's coordinator follows leadership of ``__transaction_state``."""
    state.txn_marker_listener = state.groups
    if state.config.get("transaction.partition.verification.enable"):
        state.txn_verifier = CoordinatorVerifier(lambda: state.txn)
    if state.replication is None:
        state.txn = await build_txn_coordinator(state)
