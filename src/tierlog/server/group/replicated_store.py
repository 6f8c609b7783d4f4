"""``OffsetsStore`` on the replicated ``__consumer_offsets`` of cluster mode.

The group coordinator of a group is the leader of its ``__consumer_offsets`` partition, so
its writes are a leader's appends with acks=all, as Kafka's ``GroupMetadataManager`` does
(``offsets.commit.required.acks`` is -1): the batch is stamped with the partition's leader
epoch, appended on the event loop (as Produce does, so no leadership change runs between the
leader check and the append), and the append is acknowledged only once the high watermark
passes it, within ``offsets.commit.timeout.ms``. A failure raises ``OffsetsStoreError`` with
the produce error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS[_AFTER_APPEND],
REQUEST_TIMED_OUT), which the coordinator maps to the codes Kafka answers. Loading reads up
to the log end, as Kafka's coordinator does: a new leader's tail above the high watermark is
its own log and will be committed by its followers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tierlog.log import PartitionLog
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import Compression
from tierlog.replication.manager import ReplicaManager
from tierlog.server.group.log_store import (
    DEFAULT_LOAD_BUFFER_BYTES,
    LogOffsetsStore,
    transactional_fields,
)
from tierlog.server.group.schema import OFFSETS_TOPIC
from tierlog.server.group.store import KeyValue, OffsetsStoreError


class ReplicatedOffsetsStore(LogOffsetsStore):
    def __init__(
        self,
        replication: ReplicaManager,
        log_for: Callable[[int], PartitionLog],
        num_partitions: int,
        *,
        commit_timeout_ms: int,
        compression: Compression = Compression.NONE,
        load_buffer_bytes: int = DEFAULT_LOAD_BUFFER_BYTES,
    ) -> None:
        super().__init__(
            log_for,
            num_partitions,
            compression=compression,
            load_buffer_bytes=load_buffer_bytes,
            upper_bound="leo",
        )
        self._replication = replication
        self._timeout_s = commit_timeout_ms / 1000

    async def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        repl = self._replication
        p, error = repl.leader_for(OFFSETS_TOPIC, partition)
        if p is None:
            raise OffsetsStoreError(error or ErrorCode.NOT_LEADER_OR_FOLLOWER)
        refused = p.check_produce(-1)
        if refused is not None:
            raise OffsetsStoreError(refused)
        batch = self.build(records, timestamp_ms, transactional_fields(p.log, producer))
        try:
            result = p.log.append_as_leader(batch, p.leader_epoch, -1)
        except KafkaError as exc:
            raise OffsetsStoreError(exc.code, exc.message) from exc
        repl.after_leader_append(p)
        code = await repl.wait_for_acks(p, result.last_offset + 1, self._timeout_s)
        if code is not ErrorCode.NONE:
            raise OffsetsStoreError(code)
