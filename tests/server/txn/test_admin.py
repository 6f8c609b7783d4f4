"""DescribeTransactions and ListTransactions over a coordinator's ids."""

from __future__ import annotations

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.txn.admin import ListedTxn, describe, list_transactions
from tierlog.server.txn.state import TxnMetadata, TxnState

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _meta(tid: str, state: TxnState, pid: int, start_ms: int = -1) -> TxnMetadata:
    return TxnMetadata(
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=2,
        timeout_ms=500,
        state=state,
        partitions=frozenset({TP1, TP0}) if state is TxnState.ONGOING else frozenset(),
        start_ms=start_ms,
    )


CACHE = {
    "a": _meta("a", TxnState.ONGOING, 1, start_ms=100),
    "b": _meta("b", TxnState.EMPTY, 2),
    "c": _meta("c", TxnState.COMPLETE_COMMIT, 3, start_ms=900),
    "d": _meta("d", TxnState.DEAD, 4),
}


def test_describe() -> None:
    described = describe("a", CACHE["a"])
    assert described.error is ErrorCode.NONE
    assert (described.state, described.producer_id, described.producer_epoch) == ("Ongoing", 1, 2)
    assert (described.timeout_ms, described.start_ms) == (500, 100)
    assert described.partitions == (TP0, TP1)
    assert describe("d", CACHE["d"]).error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert describe("x", None).error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert describe("", None).error is ErrorCode.INVALID_REQUEST


def test_list_all_but_dead() -> None:
    listed, unknown = list_transactions(CACHE, 1000)
    assert [t.transactional_id for t in listed] == ["a", "b", "c"] and unknown == []
    assert listed[0] == ListedTxn("a", 1, "Ongoing")


def test_list_filters() -> None:
    listed, unknown = list_transactions(CACHE, 1000, states=["Ongoing", "Bogus"])
    assert [t.transactional_id for t in listed] == ["a"] and unknown == ["Bogus"]
    assert list_transactions(CACHE, 1000, states=["Bogus"]) == ([], ["Bogus"])
    listed, _ = list_transactions(CACHE, 1000, producer_ids=[2, 3])
    assert [t.transactional_id for t in listed] == ["b", "c"]
    listed, _ = list_transactions(CACHE, 1000, min_duration_ms=500)
    assert [t.transactional_id for t in listed] == ["a"]
    assert list_transactions(CACHE, 1000, states=["Dead"]) == ([], [])
