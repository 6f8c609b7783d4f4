"""Where the coordinator's ``__consumer_offsets`` records go.

The coordinator encodes Kafka's keys and values itself (``schema.py``) and hands a store
opaque ``(key, value)`` pairs per offsets-topic partition, so a store only has to append
atomically and replay in order. That keeps every format decision out of the stores and lets
the state machine be tested on the in-memory store while the log-backed store is tested
against a real log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tierlog.protocol.errors import ErrorCode

KeyValue = tuple[bytes, bytes | None]


@dataclass(slots=True)
class LoadedPartition:
    """What loading one ``__consumer_offsets`` partition read.

    ``records``: every keyed record in append order, those of a committed transaction where
    its marker is. ``pending``: per producer id, the records of transactions whose marker was
    not in what was read. ``end_offset``: where the read stopped; a marker appended at or past
    it while the load ran was not seen, so the coordinator applies it after the load.
    """

    records: list[KeyValue] = field(default_factory=list)
    pending: dict[int, list[KeyValue]] = field(default_factory=dict)
    end_offset: int = 0


class OffsetsStoreError(Exception):
    """An append that did not happen; ``code`` is the log's Kafka error code."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code


class OffsetsStore(Protocol):
    """Contract: ``append`` is all-or-nothing and ordered per partition; ``load`` returns
    every record ever appended (tombstones included) partition by partition in append order,
    ``load_partition`` the same for one partition (a coordinator that became its leader),
    with the transactions still open and the offset the read stopped at.
    A failed ``append`` raises ``OffsetsStoreError`` and leaves nothing behind; an append
    returns once the records are as durable as the store promises (cluster mode: in the
    ISR)."""

    async def load(self) -> list[KeyValue]: ...

    async def load_partition(self, partition: int) -> LoadedPartition: ...

    def take_pending(self) -> dict[int, list[KeyValue]]:
        """After ``load``: per producer id, the records of transactions whose marker was not
        in the log (a load returns those of committed transactions where their marker is)."""
        ...

    async def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """``producer`` (id, epoch): the records join that producer's transaction."""
        ...


class MemoryOffsetsStore:
    """Keeps records in a dict: for tests and for brokers that need no durable groups.

    Handing the same instance to a second coordinator simulates a restart. Transactional
    records are not kept (no marker ever reaches this store): a restart forgets them.
    """

    def __init__(self) -> None:
        self.partitions: dict[int, list[KeyValue]] = {}

    async def load(self) -> list[KeyValue]:
        return [kv for p in sorted(self.partitions) for kv in self.partitions[p]]

    async def load_partition(self, partition: int) -> LoadedPartition:
        records = list(self.partitions.get(partition, []))
        return LoadedPartition(records, end_offset=len(records))

    def take_pending(self) -> dict[int, list[KeyValue]]:
        return {}

    async def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        if producer is None:
            self.partitions.setdefault(partition, []).extend(records)
