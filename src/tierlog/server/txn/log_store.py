"""``__transaction_state`` on the broker's own log: where the coordinator's metadata goes.

Each write is one uncompressed record in its own v2 batch (no producer id), appended as
leader with acks=-1, and answered only once it is durable: in single-node mode when the
append returned, in cluster mode once the high watermark passed it (``wait_durable``, given
by the wiring). Loading reads a partition from its log start to its log end (not the high
watermark: a new leader's uncommitted tail is its own, as in Kafka) in
``transaction.state.log.load.buffer.size`` chunks. Log I/O runs in a worker thread so a slow
disk stalls no other connection; appends of one partition are serialised by a lock so the
records land in the order the coordinator decided them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from tierlog.log import PartitionLog
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches

DEFAULT_LOAD_BUFFER_BYTES = 5 * 1024 * 1024

KeyValue = tuple[bytes, bytes | None]


#: Waits until ``end_offset`` of a partition is durable; the error if it cannot be.
WaitDurable = Callable[[int, int], Awaitable[ErrorCode]]


async def _durable_now(partition: int, end_offset: int) -> ErrorCode:
    return ErrorCode.NONE


def map_append_error(code: ErrorCode) -> ErrorCode:
    """Kafka's ``appendTransactionToLog`` mapping of a log error to the coordinator's answer."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


class TxnStore(Protocol):
    """Where the coordinator's records go. ``append`` answers NONE once the record is durable,
    or the log's error (the coordinator maps it with ``map_append_error``); ``load`` returns a
    partition's (key, value) records in log order."""

    async def append(
        self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int
    ) -> ErrorCode: ...

    async def load(self, partition: int) -> list[KeyValue]: ...


class TxnLogStore:
    """``log_for(partition)`` returns the log of ``__transaction_state-<partition>`` (or raises
    ``KeyError``); ``leader_epoch_for(partition)`` the epoch appends are stamped with."""

    def __init__(
        self,
        log_for: Callable[[int], PartitionLog],
        *,
        leader_epoch_for: Callable[[int], int] = lambda _p: 0,
        wait_durable: WaitDurable = _durable_now,
        load_buffer_bytes: int = DEFAULT_LOAD_BUFFER_BYTES,
    ) -> None:
        self._log_for = log_for
        self._leader_epoch_for = leader_epoch_for
        self._wait_durable = wait_durable
        self._load_buffer_bytes = load_buffer_bytes
        self._locks: dict[int, asyncio.Lock] = {}

    async def append(
        self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int
    ) -> ErrorCode:
        """Append one record and wait until it is durable; NONE or the log's error."""
        batch = build_batch(
            [SimpleRecord(value, key=key, timestamp=timestamp_ms)], timestamp=timestamp_ms
        )
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            try:
                end = await asyncio.to_thread(self._append, partition, batch)
            except KeyError:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            except KafkaError as exc:
                return exc.code
        return await self._wait_durable(partition, end)

    def _append(self, partition: int, batch: bytes) -> int:
        plog = self._log_for(partition)
        result = plog.append_as_leader(batch, self._leader_epoch_for(partition), -1)
        return int(result.last_offset) + 1

    async def load(self, partition: int) -> list[KeyValue]:
        """Every keyed record of the partition, in log order."""
        return await asyncio.to_thread(self._load, partition)

    def _load(self, partition: int) -> list[KeyValue]:
        plog = self._log_for(partition)
        out: list[KeyValue] = []
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, self._load_buffer_bytes, True, "leo")
            if data.size == 0:
                break
            buf = b"".join(bytes(chunk) for chunk in data.chunks)
            headers = scan_batches(buf)
            for header in headers:
                if header.is_control:
                    continue
                for record in iter_records(buf, header):
                    if record.offset >= offset and record.key is not None:
                        out.append((record.key, record.value))
            offset = headers[-1].next_offset
        return out
