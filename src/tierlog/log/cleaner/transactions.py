"""Where transactions plug into cleaning: Kafka's ``CleanedTransactionMetadata`` rules.

The policy is fed the aborted transactions (from the ``.txnindex`` files) overlapping what is
read, and sees every batch in offset order:

* a transactional batch of a producer whose aborted transaction has begun (its first offset
  reached) is ``DISCARD``ed: aborted data goes, and its keys are not mapped either;
* any other data batch is an ordinary one (``FILTER``), committed transactional data too;
* an ABORT marker is kept, and its transaction re-indexed in the cleaned ``.txnindex``, as
  long as this pass saw a batch of that transaction (the batch may survive as an empty one
  that keeps its producer's sequence); otherwise it is no longer needed;
* a COMMIT marker is no longer needed once this pass saw no batch of its transaction;
* a marker no longer needed is ``MARKER_REMOVABLE``: as a tombstone, it is first kept with a
  delete horizon (``delete.retention.ms``, KIP-534) and dropped by a cleaning after it, so a
  consumer that read the data before has time to read the marker.

Cleaning never passes the last stable offset (``cleanable``), so every transaction whose
batches are read here has its marker in the log.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable
from dataclasses import dataclass

from tierlog.log.txn_index import AbortedTxn
from tierlog.protocol.records import BatchHeader
from tierlog.protocol.txn_markers import marker_of_batch


class BatchAction(enum.Enum):
    KEEP = "keep"
    """Copy the batch unchanged and leave its keys out of the offset map."""
    FILTER = "filter"
    """Map its keys and keep only its latest records (an ordinary batch)."""
    DISCARD = "discard"
    """Drop the batch (its records, e.g. aborted data), keeping an empty batch if needed."""
    MARKER_REMOVABLE = "marker-removable"
    """A transaction marker no longer needed: kept with a delete horizon, then dropped."""


@dataclass(slots=True)
class _OngoingAbort:
    txn: AbortedTxn
    seen_batch: bool = False


class TransactionPolicy:
    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []
        self._added: set[AbortedTxn] = set()
        self._aborting: dict[int, _OngoingAbort] = {}
        self._committing: set[int] = set()
        self.cleaned_index: list[AbortedTxn] = []
        """The aborted transactions whose ABORT marker was kept, in marker order."""
        self.add_aborted(aborted)

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        """Aborted transactions of the next batches to be read (repeats are ignored)."""
        for txn in aborted:
            if txn not in self._added:
                self._added.add(txn)
                bisect.insort(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _begin_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = self._pending.pop(0)[2]
            self._aborting.setdefault(txn.producer_id, _OngoingAbort(txn))

    def on_batch(self, header: BatchHeader, data: bytes) -> BatchAction:
        """The action for the whole batch ``data``; call once per batch, in offset order."""
        self._begin_up_to(header.last_offset)
        if header.is_control:
            return self._on_control_batch(header, data)
        if not header.is_transactional:
            return BatchAction.FILTER
        ongoing = self._aborting.get(header.producer_id)
        if ongoing is not None:
            ongoing.seen_batch = True
            return BatchAction.DISCARD
        self._committing.add(header.producer_id)
        return BatchAction.FILTER

    def _on_control_batch(self, header: BatchHeader, data: bytes) -> BatchAction:
        marker = marker_of_batch(data, header._replace(position=0))
        pid = header.producer_id
        if marker is None:
            return BatchAction.KEEP
        if marker.committed:
            if pid in self._committing:
                self._committing.discard(pid)
                return BatchAction.KEEP
            return BatchAction.MARKER_REMOVABLE
        ongoing = self._aborting.pop(pid, None)
        if ongoing is not None and ongoing.seen_batch:
            self.cleaned_index.append(ongoing.txn)
            return BatchAction.KEEP
        return BatchAction.MARKER_REMOVABLE
