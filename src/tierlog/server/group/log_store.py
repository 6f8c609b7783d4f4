"""``OffsetsStore`` on the broker's own log: the ``__consumer_offsets`` partitions.

Each append becomes one v2 record batch in ``offsets.topic.compression.codec`` (so a commit
of many partitions is all-or-nothing, as in Kafka), appended as leader with acks=-1. Every
record has a key, so the log cleaner can compact the topic: it keeps the latest record per
key, and tombstones (offset expiry, OffsetDelete, DeleteGroups) until
``delete.retention.ms`` after the cleaning that reaches them. Loading reads every partition
from its log start to its end in ``offsets.load.buffer.size`` chunks; on a cleaned log that
is the live state plus the dirty tail, not the whole history of commits. Log I/O runs in a
worker thread so a slow disk stalls neither heartbeats nor other connections;
``PartitionLog`` locks internally, and the coordinator issues one append at a time, so
appends stay in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tierlog.log import LogError, PartitionLog
from tierlog.protocol.records import (
    Compression,
    SimpleRecord,
    build_batch,
    iter_records,
    scan_batches,
)
from tierlog.server.group.store import KeyValue, OffsetsStoreError

DEFAULT_LOAD_BUFFER_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LoadStats:
    """What the last ``load`` read: records (tombstones included), batch bytes, seconds."""

    records: int
    bytes: int
    seconds: float


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
        compression: Compression = Compression.NONE,
        load_buffer_bytes: int = DEFAULT_LOAD_BUFFER_BYTES,
        upper_bound: Literal["hw", "leo"] = "hw",
    ) -> None:
        self._log_for = log_for
        self._num_partitions = num_partitions
        self._leader_epoch = leader_epoch
        self._compression = compression
        self._load_buffer_bytes = load_buffer_bytes
        self._upper_bound: Literal["hw", "leo"] = upper_bound
        self.last_load: LoadStats | None = None

    async def load(self) -> list[KeyValue]:
        return await asyncio.to_thread(self._load_all)

    async def load_partition(self, partition: int) -> list[KeyValue]:
        return await asyncio.to_thread(self._load_one, partition)

    def _load_one(self, partition: int) -> list[KeyValue]:
        out: list[KeyValue] = []
        self._load_partition(self._log_for(partition), out)
        return out

    def build(self, records: Sequence[KeyValue], timestamp_ms: int) -> bytes:
        """One batch of ``records`` in the coordinator's codec."""
        return build_batch(
            [SimpleRecord(value=v, key=k, timestamp=timestamp_ms) for k, v in records],
            timestamp=timestamp_ms,
            compression=self._compression,
        )

    async def append(self, partition: int, records: Sequence[KeyValue], timestamp_ms: int) -> None:
        batch = self.build(records, timestamp_ms)
        await asyncio.to_thread(self._append, partition, batch)

    def _append(self, partition: int, batch: bytes) -> None:
        try:
            self._log_for(partition).append_as_leader(batch, self._leader_epoch, -1)
        except LogError as exc:
            raise OffsetsStoreError(exc.code, exc.message) from exc

    def _load_all(self) -> list[KeyValue]:
        started = time.monotonic()
        out: list[KeyValue] = []
        read_bytes = 0
        for partition in range(self._num_partitions):
            read_bytes += self._load_partition(self._log_for(partition), out)
        self.last_load = LoadStats(len(out), read_bytes, time.monotonic() - started)
        return out

    def _load_partition(self, log: PartitionLog, out: list[KeyValue]) -> int:
        """Append the partition's keyed records to ``out``; returns the bytes read."""
        read_bytes = 0
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            data = log.read(offset, self._load_buffer_bytes, True, self._upper_bound)
            if data.size == 0:
                break
            buf = b"".join(bytes(chunk) for chunk in data.chunks)
            read_bytes += len(buf)
            headers = scan_batches(buf)
            for header in headers:
                if header.is_control:
                    continue
                for record in iter_records(buf, header):
                    if record.offset >= offset and record.key is not None:
                        out.append((record.key, record.value))
            offset = headers[-1].next_offset
        return read_bytes
