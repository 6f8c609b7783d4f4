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
from typing import Any, Literal

from tierlog.log import LogError, PartitionLog
from tierlog.protocol.records import (
    Compression,
    SimpleRecord,
    build_batch,
    increment_sequence,
    iter_records,
    scan_batches,
)
from tierlog.protocol.txn_markers import marker_of_batch
from tierlog.server.group.store import KeyValue, LoadedPartition, OffsetsStoreError


def transactional_fields(plog: PartitionLog, producer: tuple[int, int] | None) -> dict[str, Any]:
    """``build_batch`` arguments that put a batch in ``producer``'s transaction (none for a
    plain write). Kafka skips sequence checks for the coordinator's own appends; our log checks
    every producer batch, and the coordinator is the only writer of a producer's batches on
    ``__consumer_offsets``, so it continues the sequence the log holds (0 in a new epoch)."""
    if producer is None:
        return {}
    producer_id, epoch = producer
    entry = plog.producer_state.producers.get(producer_id)
    sequence = 0
    if entry is not None and entry.producer_epoch == epoch and entry.batches:
        sequence = increment_sequence(entry.last_seq, 1)
    return {
        "producer_id": producer_id,
        "producer_epoch": epoch,
        "base_sequence": sequence,
        "transactional": True,
    }


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
        self._pending: dict[int, list[KeyValue]] = {}

    async def load(self) -> list[KeyValue]:
        return await asyncio.to_thread(self._load_all)

    async def load_partition(self, partition: int) -> LoadedPartition:
        return await asyncio.to_thread(self._load_one, partition)

    def _load_one(self, partition: int) -> LoadedPartition:
        loaded = LoadedPartition()
        self._load_partition(self._log_for(partition), loaded)
        return loaded

    def take_pending(self) -> dict[int, list[KeyValue]]:
        pending, self._pending = self._pending, {}
        return pending

    def build(
        self, records: Sequence[KeyValue], timestamp_ms: int, txn: dict[str, Any] | None = None
    ) -> bytes:
        """One batch of ``records`` in the coordinator's codec (``txn``: see
        ``transactional_fields``)."""
        return build_batch(
            [SimpleRecord(value=v, key=k, timestamp=timestamp_ms) for k, v in records],
            timestamp=timestamp_ms,
            compression=self._compression,
            **(txn or {}),
        )

    async def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        await asyncio.to_thread(self._append, partition, records, timestamp_ms, producer)

    def _append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        producer: tuple[int, int] | None,
    ) -> None:
        plog = self._log_for(partition)
        batch = self.build(records, timestamp_ms, transactional_fields(plog, producer))
        try:
            plog.append_as_leader(batch, self._leader_epoch, -1)
        except LogError as exc:
            raise OffsetsStoreError(exc.code, exc.message) from exc

    def _load_all(self) -> list[KeyValue]:
        started = time.monotonic()
        out: list[KeyValue] = []
        read_bytes = 0
        for partition in range(self._num_partitions):
            loaded = LoadedPartition(out, self._pending)
            read_bytes += self._load_partition(self._log_for(partition), loaded)
        self.last_load = LoadStats(len(out), read_bytes, time.monotonic() - started)
        return out

    def _load_partition(self, log: PartitionLog, loaded: LoadedPartition) -> int:
        """Add the partition's keyed records to ``loaded``; returns the bytes read. Records of
        a transaction go to its records where the COMMIT marker is, nowhere if it aborted,
        and to its pending ones if it is still open."""
        out = loaded.records
        open_txns: dict[int, list[KeyValue]] = {}
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
                    marker = marker_of_batch(buf, header)
                    held = open_txns.pop(header.producer_id, [])
                    if marker is not None and marker.committed:
                        out.extend(held)
                    continue
                target = (
                    open_txns.setdefault(header.producer_id, []) if header.is_transactional else out
                )
                for record in iter_records(buf, header):
                    if record.offset >= offset and record.key is not None:
                        target.append((record.key, record.value))
            offset = headers[-1].next_offset
        for pid, held in open_txns.items():
            loaded.pending.setdefault(pid, []).extend(held)
        loaded.end_offset = offset
        return read_bytes
