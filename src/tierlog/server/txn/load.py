"""Rebuilding a ``__transaction_state`` partition's transactional ids from its records.

A coordinator that becomes leader of a partition reads it from the log start to the log end
(not the high watermark) and keeps the last record of each key; a tombstone deletes the id,
and keys of a version we do not know are skipped. What the loader finds in Prepare* had its
outcome decided but maybe not its markers written: the coordinator resends them
(``awaiting_markers``). Ongoing transactions stay as they are; their timeout still runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tierlog.server.txn.schema import decode_key, decode_value
from tierlog.server.txn.state import TxnMetadata, TxnState


def load_records(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, TxnMetadata]:
    """The ids of one partition from its (key, value) records in log order."""
    cache: dict[str, TxnMetadata] = {}
    for key, value in records:
        if key is None:
            continue
        tid = decode_key(key)
        if tid is None:
            continue
        decoded = decode_value(value)
        if decoded is None:
            cache.pop(tid, None)
        else:
            cache[tid] = TxnMetadata.from_log_value(tid, decoded)
    return cache


def awaiting_markers(cache: Mapping[str, TxnMetadata]) -> list[TxnMetadata]:
    """The transactions whose markers a new coordinator must (re)send, in id order."""
    prepare = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
    return [cache[tid] for tid in sorted(cache) if cache[tid].state in prepare]
