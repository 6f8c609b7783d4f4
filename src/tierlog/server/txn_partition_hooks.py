"""Where a partition leader meets the transaction coordinator, other than over WriteTxnMarkers.

Two narrow seams the coordinator implements (single-node and cluster mode alike):

* ``TxnVerifier`` (KIP-890 part 1): before a producer's first transactional write to a
  partition the leader asks whether the partition is in the producer's transaction. The
  answer uses the coordinator's codes (AddPartitionsToTxn v4+ with ``VerifyOnly``); the
  Produce handler converts them into what a producer expects. The default allows everything,
  which is Kafka with ``transaction.partition.verification.enable=false``.
* ``TxnMarkerListener``: told of every marker written to a partition this broker leads, after
  it is appended (and, in cluster mode, replicated). The group coordinator needs it for the
  transactional offsets it holds on ``__consumer_offsets`` (KIP-98/447).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tierlog.protocol.errors import ErrorCode

TopicPartitionKey = tuple[str, int]


class TxnVerifier(Protocol):
    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """Per partition: NONE if it is in the transaction of (``producer_id``,
        ``producer_epoch``), else the coordinator's error (TRANSACTION_ABORTABLE,
        PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS,
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, ...)."""
        ...


class TxnMarkerListener(Protocol):
    def on_marker(
        self, topic: str, partition: int, producer_id: int, committed: bool, marker_offset: int
    ) -> None: ...


class AllowAllVerifier:
    """No verification: every partition is taken to be in the transaction."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        del transactional_id, producer_id, producer_epoch
        return dict.fromkeys(partitions, ErrorCode.NONE)


#: Kafka's conversion of a verification failure for the producer (ReplicaManager,
#: AddPartitionsToTxnManager): retriable coordinator trouble becomes NOT_ENOUGH_REPLICAS (the
#: producer retries the batch without refreshing metadata), a fence INVALID_PRODUCER_EPOCH.
_RETRIABLE = frozenset(
    {
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)


def produce_error_for(code: ErrorCode, produce_version: int) -> ErrorCode:
    """What a producer is answered when verification returned ``code``."""
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if code is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code is ErrorCode.TRANSACTION_ABORTABLE and produce_version < 11:
        return ErrorCode.INVALID_TXN_STATE
    return code
