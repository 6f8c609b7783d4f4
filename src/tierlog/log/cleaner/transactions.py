"""Where transactions plug into cleaning: which batches the cleaner must not filter.

tierlog writes no transaction markers and keeps no aborted-transaction index yet, so this
policy keeps every transactional and control batch exactly as written: the cleaner neither
maps their keys nor filters their records. When transactions land, a subclass replaces it
with Kafka's ``CleanedTransactionMetadata`` rules, fed by the partition's aborted
transactions over the cleaned range:

* ``on_batch`` answers ``DISCARD`` for the batches of an aborted transaction (their keys are
  not mapped either) and ``FILTER`` for committed transactional batches;
* ``on_control_batch`` answers ``DISCARD`` for a marker once no batch of its transaction is
  left below it and its delete horizon (``delete.retention.ms``, as for tombstones) passed,
  and records the aborted transactions still present for the cleaned ``.txnindex``.
"""

from __future__ import annotations

import enum

from tierlog.protocol.records import BatchHeader


class BatchAction(enum.Enum):
    KEEP = "keep"
    """Copy the batch unchanged and leave its keys out of the offset map."""
    FILTER = "filter"
    """Map its keys and keep only its latest records (an ordinary batch)."""
    DISCARD = "discard"
    """Drop the batch (its records, e.g. aborted data), keeping an empty batch if needed."""


class TransactionPolicy:
    """The policy for a log without transactions: transactional and control batches stay."""

    def on_batch(self, header: BatchHeader, *, retain_markers: bool) -> BatchAction:
        del retain_markers
        if header.is_control:
            return self.on_control_batch(header)
        if header.is_transactional:
            return BatchAction.KEEP
        return BatchAction.FILTER

    def on_control_batch(self, header: BatchHeader) -> BatchAction:
        del header
        return BatchAction.KEEP


def policy_for_range(start_offset: int, end_offset: int) -> TransactionPolicy:
    """The policy for cleaning ``[start_offset, end_offset)``; the aborted transactions of
    that range will be looked up here."""
    del start_offset, end_offset
    return TransactionPolicy()
