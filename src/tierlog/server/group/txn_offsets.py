"""Transactional offsets (KIP-98, KIP-447) waiting for their transaction's outcome.

TxnOffsetCommit writes ordinary offset-commit records into the producer's transaction on the
group's ``__consumer_offsets`` partition; they are held here per producer id until the
COMMIT or ABORT marker lands on that partition. A COMMIT materialises them, unless the group
has a plain commit of the same partition written after them (Kafka keeps the newer one); an
ABORT drops them. A group with pending offsets is "unstable": OffsetFetch with
``require_stable`` answers UNSTABLE_OFFSET_COMMIT for such partitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tierlog.server.group.model import TopicPartition
from tierlog.server.group.schema import CommittedOffset


@dataclass(frozen=True, slots=True)
class PendingOffset:
    offset: CommittedOffset
    #: Order of the write among this coordinator's commits: a later plain commit wins.
    sequence: int


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[TopicPartition, PendingOffset]]] = {}

    def add(
        self,
        producer_id: int,
        group_id: str,
        offsets: dict[TopicPartition, CommittedOffset],
        sequence: int,
    ) -> None:
        group = self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {})
        for tp, offset in offsets.items():
            group[tp] = PendingOffset(offset, sequence)

    def is_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in groups.get(group_id, {}) for groups in self._by_producer.values())

    def has_group(self, group_id: str) -> bool:
        return any(group_id in groups for groups in self._by_producer.values())

    def complete(
        self, producer_id: int, on_partition: Callable[[str], bool]
    ) -> dict[str, dict[TopicPartition, PendingOffset]]:
        """Take the producer's pending offsets of the groups ``on_partition`` selects (those of
        the ``__consumer_offsets`` partition the marker landed on)."""
        groups = self._by_producer.get(producer_id)
        if not groups:
            return {}
        taken = {g: offsets for g, offsets in groups.items() if on_partition(g)}
        for g in taken:
            del groups[g]
        if not groups:
            del self._by_producer[producer_id]
        return taken

    def drop(self, on_partition: Callable[[str], bool]) -> None:
        """Forget every producer's pending offsets of the groups ``on_partition`` selects (a
        ``__consumer_offsets`` partition this coordinator no longer owns: their outcome is
        the next owner's, and a later load here reads it from the log)."""
        for producer_id in list(self._by_producer):
            self.complete(producer_id, on_partition)
