"""``OffsetsStore`` on the broker's own log: the ``__consumer_offsets`` partitions.

Each append becomes one uncompressed v2 record batch (so a commit of many partitions is
all-or-nothing, as in Kafka), appended as leader with acks=-1. Loading reads every partition
from its log start to its end. Log I/O runs in a worker thread so a slow disk stalls neither
heartbeats nor other connections; ``PartitionLog`` locks internally, and the coordinator
issues one append at a time, so appends stay in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from tierlog.log import LogError, PartitionLog
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches
from tierlog.server.group.store import KeyValue, OffsetsStoreError

_READ_CHUNK_BYTES = 1 << 20


class LogOffsetsStore:
    """``log_for(partition)`` returns the log of ``__consumer_offsets-<partition>``.

    The server owns topic creation, so it decides that topic's configs; it must not give it
    time or size retention, or committed offsets would silently age out of the log.
    """

    def __init__(
        self,
        log_for: Callable[[int], PartitionLog],
        num_partitions: int,
        *,
        leader_epoch: int = 0,
    ) -> None:
        self._log_for = log_for
        self._num_partitions = num_partitions
        self._leader_epoch = leader_epoch

    async def load(self) -> list[KeyValue]:
        return await asyncio.to_thread(self._load_all)

    async def append(self, partition: int, records: Sequence[KeyValue], timestamp_ms: int) -> None:
        batch = build_batch(
            [SimpleRecord(value=v, key=k, timestamp=timestamp_ms) for k, v in records],
            timestamp=timestamp_ms,
        )
        await asyncio.to_thread(self._append, partition, batch)

    def _append(self, partition: int, batch: bytes) -> None:
        try:
            self._log_for(partition).append_as_leader(batch, self._leader_epoch, -1)
        except LogError as exc:
            raise OffsetsStoreError(exc.code, exc.message) from exc

    def _load_all(self) -> list[KeyValue]:
        out: list[KeyValue] = []
        for partition in range(self._num_partitions):
            out.extend(self._load_partition(self._log_for(partition)))
        return out

    @staticmethod
    def _load_partition(log: PartitionLog) -> list[KeyValue]:
        out: list[KeyValue] = []
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            data = log.read(offset, _READ_CHUNK_BYTES, True)
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
