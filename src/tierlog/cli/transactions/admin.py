"""The transaction APIs as ``kafka-transactions.sh`` uses them through Kafka's admin client,
each sent to the broker that must answer it: ListTransactions to every broker (each lists
the ids it coordinates), DescribeTransactions to the id's coordinator (FindCoordinator, key
type transaction), DescribeProducers and WriteTxnMarkers to the partition's leader (or, for
DescribeProducers, a replica the operator names)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tierlog.cli.common import CLIENT_ID
from tierlog.cli.coordinators import (
    RETRIABLE,
    TRANSACTION,
    CoordinatorNotFound,
    error_name,
    find_coordinator,
)
from tierlog.cli.leaders import TopicPartition, leaders_of
from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

#: Kafka's admin client sends DescribeProducers in batches of at most this many partitions.
MAX_BATCH = 500


class TxnCommandError(Exception):
    """A failure the command reports as ``Error: ...`` and exits 1 for."""


@dataclass(frozen=True, slots=True)
class Listing:
    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class Description:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int | None
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    txn_start_offset: int | None


#: The leader of a partition Metadata does not name (its topic or the partition is missing).
_UNKNOWN = -2


def _no_leader(leader: int) -> int:
    """Why a partition with no leader to ask cannot be: unknown, or leaderless for now."""
    if leader == _UNKNOWN:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return int(ErrorCode.LEADER_NOT_AVAILABLE)


def tp_name(tp: TopicPartition) -> str:
    """``topic-partition``, as Kafka's ``TopicPartition.toString``."""
    return f"{tp[0]}-{tp[1]}"


def _ms(value: Any) -> int:
    """A kio time field as milliseconds (kio decodes them to datetimes and timedeltas)."""
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _producer(p: Any) -> ProducerState:
    coordinator_epoch = int(p.coordinator_epoch)
    start = int(p.current_txn_start_offset)
    return ProducerState(
        producer_id=int(p.producer_id),
        producer_epoch=int(p.producer_epoch),
        last_sequence=int(p.last_sequence),
        last_timestamp=int(p.last_timestamp),
        coordinator_epoch=coordinator_epoch if coordinator_epoch >= 0 else None,
        txn_start_offset=start if start >= 0 else None,
    )


class TxnAdmin:
    """What the command asks of the cluster, on connections opened as needed and closed
    together. ``timeout_s`` bounds the wait for a coordinator that is still loading."""

    def __init__(self, bootstrap: WireConnection, timeout_s: float = 30.0) -> None:
        self._bootstrap = bootstrap
        self._timeout_s = timeout_s
        self._metadata = bootstrap.call(
            ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False
        )
        self._brokers = BrokerConnections(bootstrap, self._metadata, CLIENT_ID)
        self._extra: list[WireConnection] = []

    def close(self) -> None:
        self._brokers.close()
        for conn in self._extra:
            conn.close()

    def broker_ids(self) -> list[int]:
        return sorted(int(b.node_id) for b in self._metadata.brokers)

    def _to(self, broker_id: int) -> WireConnection:
        if not self._brokers.knows(broker_id):
            raise TxnCommandError(f"Broker {broker_id} is not in the cluster")
        return self._brokers.to(broker_id)

    def _retrying(self, call: Any, error: Any) -> Any:
        """``call()`` again while it answers a coordinator-loading error, until the timeout."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            answer = call()
            if error(answer) not in RETRIABLE or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)

    # ---- coordinators ---------------------------------------------------------------------
    def list_transactions(
        self, states: Sequence[str] = (), producer_ids: Iterable[int] = ()
    ) -> list[Listing]:
        """Every broker's transactions (ListTransactions), in broker then id order."""
        pids = sorted(set(producer_ids))
        out: list[Listing] = []
        for broker_id in self.broker_ids():
            conn = self._to(broker_id)
            r = self._retrying(
                lambda c=conn: c.call(
                    ApiKey.LIST_TRANSACTIONS,
                    0,
                    state_filters=list(states),
                    producer_id_filters=pids,
                ),
                lambda r: int(r.error_code),
            )
            if int(r.error_code) != 0:
                raise TxnCommandError(
                    f"Failed to list transactions: {error_name(int(r.error_code))} "
                    f"(broker {broker_id})"
                )
            out.extend(
                Listing(
                    str(t.transactional_id), broker_id, int(t.producer_id), str(t.transaction_state)
                )
                for t in sorted(r.transaction_states, key=lambda t: str(t.transactional_id))
            )
        return out

    def describe(self, transactional_id: str) -> Description | int:
        """DescribeTransactions on the id's coordinator: its description, or the error code
        (TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know)."""

        def ask() -> tuple[int, Any]:
            try:
                node, conn = find_coordinator(
                    self._bootstrap, self._brokers, transactional_id, TRANSACTION, self._timeout_s
                )
            except CoordinatorNotFound as e:
                return -1, e.code
            if not self._brokers.knows(node.node_id):
                self._extra.append(conn)
            r = conn.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[transactional_id])
            return node.node_id, r.transaction_states[0]

        # a lookup that failed has already been retried until the timeout: final
        node_id, t = self._retrying(
            ask, lambda a: 0 if isinstance(a[1], int) else int(a[1].error_code)
        )
        if isinstance(t, int):
            return t
        if int(t.error_code) != 0:
            return int(t.error_code)
        start = _ms(t.transaction_start_time)
        return Description(
            coordinator_id=node_id,
            transactional_id=transactional_id,
            producer_id=int(t.producer_id),
            producer_epoch=int(t.producer_epoch),
            state=str(t.transaction_state),
            timeout_ms=_ms(t.transaction_timeout),
            start_ms=start if start >= 0 else None,
            partitions=tuple(
                (str(topic.topic), int(p)) for topic in t.topics for p in topic.partitions
            ),
        )

    # ---- partitions -----------------------------------------------------------------------
    def leaders(self, topics: Sequence[str]) -> dict[TopicPartition, int]:
        return leaders_of(self._bootstrap, topics)

    def replicas(self, topics: Sequence[str] | None) -> dict[TopicPartition, list[int]]:
        """Each partition's replicas (Metadata): of ``topics``, or of every topic, internal
        ones included, when None (as Kafka's ``find-hanging`` lists them)."""
        md = self._bootstrap.call(
            ApiKey.METADATA,
            12,
            topics=None if topics is None else [{"name": t} for t in topics],
            allow_auto_topic_creation=False,
        )
        missing = [str(t.name) for t in md.topics if int(t.error_code) != 0]
        if missing:
            raise TxnCommandError(f"Failed to describe {len(missing)} topics: {', '.join(missing)}")
        return {
            (str(t.name), int(p.partition_index)): [int(r) for r in p.replica_nodes]
            for t in md.topics
            for p in t.partitions
        }

    def producers(
        self, partitions: Sequence[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, tuple[int, list[ProducerState]]]:
        """DescribeProducers of ``partitions`` on ``broker_id``, or on each one's leader:
        per partition its error code and active producers (the leader's answer is Kafka's
        default; a named broker answers for its replica)."""
        if broker_id is not None:
            destinations = {tp: broker_id for tp in partitions}
        else:
            leaders = self.leaders(sorted({t for t, _ in partitions}))
            destinations = {tp: leaders.get(tp, _UNKNOWN) for tp in partitions}
        out: dict[TopicPartition, tuple[int, list[ProducerState]]] = {}
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, dest in destinations.items():
            if dest < 0:
                out[tp] = (_no_leader(dest), [])
            else:
                by_broker.setdefault(dest, []).append(tp)
        for dest, tps in sorted(by_broker.items()):
            conn = self._to(dest)
            for i in range(0, len(tps), MAX_BATCH):
                batch = tps[i : i + MAX_BATCH]
                topics: dict[str, list[int]] = {}
                for topic, p in batch:
                    topics.setdefault(topic, []).append(p)
                r = conn.call(
                    ApiKey.DESCRIBE_PRODUCERS,
                    0,
                    topics=[{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                )
                for t in r.topics:
                    for p in t.partitions:
                        out[(str(t.name), int(p.partition_index))] = (
                            int(p.error_code),
                            [_producer(x) for x in p.active_producers],
                        )
        return out

    def abort(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> int:
        """WriteTxnMarkers with one ABORT marker on the partition's leader, as Kafka's
        ``Admin.abortTransaction`` sends it: the error code the leader answers."""
        leader = self.leaders([tp[0]]).get(tp, _UNKNOWN)
        if leader < 0:
            return _no_leader(leader)
        r = self._to(leader).call(
            ApiKey.WRITE_TXN_MARKERS,
            1,
            markers=[
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": False,
                    "topics": [{"name": tp[0], "partition_indexes": [tp[1]]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ],
        )
        codes = [int(p.error_code) for m in r.markers for t in m.topics for p in t.partitions]
        return next((c for c in codes if c != 0), 0)
