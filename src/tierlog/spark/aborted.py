"""read_committed on the executors: drop the batches of aborted transactions.

The same rule a Kafka consumer applies to a read_committed Fetch: aborted transactions are
known as (producer id, first offset) pairs; a producer becomes aborted at the first batch
reaching its first offset, its transactional batches are dropped from there, and its ABORT
marker (a control batch) ends that. A pair whose ABORT marker lies before the read is never
given (the driver and the broker filter them by the marker's offset), so a producer's later
committed transaction is never mistaken for the aborted one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from tierlog.protocol.records import read_header
from tierlog.protocol.txn_markers import marker_of_batch

_TRANSACTIONAL = 0x10
_CONTROL = 0x20


class AbortedTxnFilter:
    def __init__(self, aborted: Iterable[tuple[int, int]] = ()) -> None:
        self._pending: list[tuple[int, int]] = []
        self._known: set[tuple[int, int]] = set()
        self._aborting: set[int] = set()
        self.add(aborted)

    def add(self, aborted: Iterable[tuple[int, int]]) -> None:
        """More (producer id, first offset) pairs, as each Fetch response brings them."""
        for pid, first in aborted:
            if (pid, first) not in self._known:
                self._known.add((pid, first))
                bisect.insort(self._pending, (first, pid))

    def drops(self, batch: bytes | memoryview, producer_id: int, attributes: int) -> bool:
        """Whether the whole batch ``batch`` (its bytes from its first) is left out; call it
        once per batch, in offset order. Control batches are always left out."""
        if not attributes & (_TRANSACTIONAL | _CONTROL) or producer_id < 0:
            return bool(attributes & _CONTROL)
        header = read_header(batch, 0)
        while self._pending and self._pending[0][0] <= header.last_offset:
            self._aborting.add(self._pending.pop(0)[1])
        if attributes & _CONTROL:
            marker = marker_of_batch(batch, header)
            if marker is not None and not marker.committed:
                self._aborting.discard(producer_id)
            return True
        return producer_id in self._aborting
