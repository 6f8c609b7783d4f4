"""KIP-890 part 1 on this broker: the partition leader's ``TxnVerifier`` answered by the
transaction coordinator.

Before a producer's first transactional write to a partition, the produce path asks whether
the partition is in the producer's ongoing transaction. The coordinator of the id answers as
AddPartitionsToTxn v4+ with VerifyOnly does (``TxnCoordinator.verify``): in process when this
broker is that coordinator, else (cluster mode) over the wire with AddPartitionsToTxn v4 to
the leader of the id's ``__transaction_state`` partition. One connection per coordinator
broker, one request at a time on it (a lock); a failed connection answers NETWORK_EXCEPTION,
which the produce path turns into a retriable NOT_ENOUGH_REPLICAS. With
``transaction.partition.verification.enable=false`` the broker keeps the allow-all default.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.txn.coordinator import TxnCoordinator
from tierlog.server.txn.markers import Connect, Connection, Destination
from tierlog.server.txn_partition_hooks import TopicPartitionKey

log = logging.getLogger(__name__)

VERIFY_VERSION = 4
VERIFY_TIMEOUT_S = 10.0


class CoordinatorVerifier:
    """``coordinator()`` is the broker's coordinator, or None while it is being built."""

    def __init__(self, coordinator: Callable[[], TxnCoordinator | None], connect: Connect) -> None:
        self._coordinator = coordinator
        self._connect = connect
        self._connections: dict[Destination, tuple[asyncio.Lock, list[Connection]]] = {}

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
        if verdict is ErrorCode.NOT_COORDINATOR and coordinator.placement is not None:
            return await self._remote(
                coordinator, transactional_id, producer_id, producer_epoch, partitions
            )
        if isinstance(verdict, ErrorCode):
            return dict.fromkeys(partitions, verdict)
        return {
            (t, p): verdict.get(TopicPartition(t, p), ErrorCode.TRANSACTION_ABORTABLE)
            for t, p in partitions
        }

    async def _remote(
        self,
        coordinator: TxnCoordinator,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        assert coordinator.placement is not None
        entry = await coordinator.placement.coordinator_for(
            transactional_id, coordinator.partition_for(transactional_id)
        )
        if entry.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        dest = Destination(entry.node_id, entry.host, entry.port)
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        lock, held = self._connections.setdefault(dest, (asyncio.Lock(), []))
        async with lock:
            try:
                if not held:
                    held.append(await self._connect(dest))
                response = await held[0].call(
                    ApiKey.ADD_PARTITIONS_TO_TXN,
                    VERIFY_VERSION,
                    VERIFY_TIMEOUT_S,
                    transactions=[
                        {
                            "transactional_id": transactional_id,
                            "producer_id": producer_id,
                            "producer_epoch": producer_epoch,
                            "verify_only": True,
                            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                        }
                    ],
                )
            except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as e:
                log.info("verification at broker %d failed: %r", dest.node_id, e)
                if held:
                    await held.pop().close()
                return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, ErrorCode(int(response.error_code)))
        out: dict[TopicPartitionKey, ErrorCode] = {}
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for part in topic.results_by_partition:
                    out[(topic.name, int(part.partition_index))] = ErrorCode(
                        int(part.partition_error_code)
                    )
        return {tp: out.get(tp, ErrorCode.TRANSACTION_ABORTABLE) for tp in partitions}

    async def close(self) -> None:
        for _lock, held in self._connections.values():
            for conn in held:
                await conn.close()
        self._connections.clear()
