"""KIP-890 part 1 on this broker: the partition leader's ``TxnVerifier`` answered by the
transaction coordinator.

Before a producer's first transactional write to a partition, the produce path asks whether
the partition is in the producer's ongoing transaction. The coordinator of the id answers as
AddPartitionsToTxn v4+ with VerifyOnly does (``TxnCoordinator.verify``). In single-node mode
it is this broker's own coordinator, asked in process; an id whose coordinator is elsewhere is
answered NOT_COORDINATOR, which the produce path turns into a retriable NOT_ENOUGH_REPLICAS.
With ``transaction.partition.verification.enable=false`` the broker keeps the allow-all
default instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.txn.coordinator import TxnCoordinator
from tierlog.server.txn_partition_hooks import TopicPartitionKey


class CoordinatorVerifier:
    """``coordinator()`` is the broker's coordinator, or None while it is being built."""

    def __init__(self, coordinator: Callable[[], TxnCoordinator | None]) -> None:
        self._coordinator = coordinator

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        coordinator = self._coordinator()
        if coordinator is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        verdict = coordinator.verify(
            transactional_id,
            producer_id,
            producer_epoch,
            [TopicPartition(t, p) for t, p in partitions],
        )
        if isinstance(verdict, ErrorCode):
            return dict.fromkeys(partitions, verdict)
        return {
            (t, p): verdict.get(TopicPartition(t, p), ErrorCode.TRANSACTION_ABORTABLE)
            for t, p in partitions
        }
