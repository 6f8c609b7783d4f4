"""What DescribeTransactions and ListTransactions answer about a coordinator's ids.

Dead ids are never shown. During Prepare* the partitions shown are those still awaiting their
marker. ListTransactions filters by state name (names it does not know are echoed back as
``unknown_states``), by producer id, and by duration: only transactions that started more
than ``min_duration_ms`` ago (-1: no duration filter).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.txn.state import TxnMetadata, TxnState

_LABELS = {state.label: state for state in TxnState}


@dataclass(frozen=True, slots=True)
class DescribedTxn:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    start_ms: int = -1
    partitions: tuple[TopicPartition, ...] = ()


def describe(transactional_id: str, meta: TxnMetadata | None) -> DescribedTxn:
    """One id of a DescribeTransactions request, once ownership and ACLs were checked."""
    if not transactional_id:
        return DescribedTxn(transactional_id, ErrorCode.INVALID_REQUEST)
    if meta is None or meta.state is TxnState.DEAD:
        return DescribedTxn(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    return DescribedTxn(
        transactional_id,
        ErrorCode.NONE,
        meta.state.label,
        meta.producer_id,
        meta.producer_epoch,
        meta.timeout_ms,
        meta.start_ms,
        tuple(sorted(meta.partitions)),
    )


@dataclass(frozen=True, slots=True)
class ListedTxn:
    transactional_id: str
    producer_id: int
    state: str


def list_transactions(
    cache: Mapping[str, TxnMetadata],
    now_ms: int,
    *,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    min_duration_ms: int = -1,
) -> tuple[list[ListedTxn], list[str]]:
    """The listed transactions in id order, and the state filters we do not know."""
    names = list(states)
    unknown = [name for name in names if name not in _LABELS]
    wanted_states = {_LABELS[name] for name in names if name in _LABELS}
    if names and not wanted_states:
        return [], unknown
    pids = set(producer_ids)
    out = []
    for tid in sorted(cache):
        m = cache[tid]
        if m.state is TxnState.DEAD:
            continue
        if wanted_states and m.state not in wanted_states:
            continue
        if pids and m.producer_id not in pids:
            continue
        if min_duration_ms >= 0 and (m.start_ms < 0 or now_ms - m.start_ms <= min_duration_ms):
            continue
        out.append(ListedTxn(tid, m.producer_id, m.state.label))
    return out, unknown
