"""``__transaction_state`` in cluster mode: the coordinator's writes are a leader's appends
with acks=all.

The coordinator of a transactional id is the leader of its partition, so each write is
appended through the replication ``Partition`` it leads, stamped with that partition's leader
epoch, on the event loop (as Produce does, so no leadership change runs between the leader
check and the append), and acknowledged once the high watermark passes it, within
``timeout_ms``. Errors are the produce errors (NOT_LEADER_OR_FOLLOWER,
NOT_ENOUGH_REPLICAS[_AFTER_APPEND], REQUEST_TIMED_OUT), which the coordinator maps as
Kafka's ``appendTransactionToLog`` does. Loading reads to the log end, as
``TxnLogStore`` does.
"""

from __future__ import annotations

from collections.abc import Callable

from tierlog.log import PartitionLog
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.replication.manager import ReplicaManager
from tierlog.server.txn.log_store import DEFAULT_LOAD_BUFFER_BYTES, TxnLogStore
from tierlog.server.txn.schema import TRANSACTION_STATE_TOPIC

DEFAULT_TIMEOUT_MS = 30_000


class ReplicatedTxnLogStore(TxnLogStore):
    def __init__(
        self,
        replication: ReplicaManager,
        log_for: Callable[[int], PartitionLog],
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        load_buffer_bytes: int = DEFAULT_LOAD_BUFFER_BYTES,
    ) -> None:
        super().__init__(log_for, load_buffer_bytes=load_buffer_bytes)
        self._replication = replication
        self._timeout_s = timeout_ms / 1000

    async def append(
        self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int
    ) -> ErrorCode:
        repl = self._replication
        p, error = repl.leader_for(TRANSACTION_STATE_TOPIC, partition)
        if p is None:
            return error or ErrorCode.NOT_LEADER_OR_FOLLOWER
        refused = p.check_produce(-1)
        if refused is not None:
            return refused
        batch = build_batch(
            [SimpleRecord(value, key=key, timestamp=timestamp_ms)], timestamp=timestamp_ms
        )
        try:
            result = p.log.append_as_leader(batch, p.leader_epoch, -1)
        except KafkaError as exc:
            return exc.code
        repl.after_leader_append(p)
        return await repl.wait_for_acks(p, result.last_offset + 1, self._timeout_s)
