"""Loading a ``__transaction_state`` partition: last record per id wins, tombstones delete."""

from __future__ import annotations

from dataclasses import replace

from tierlog.server.group.model import TopicPartition
from tierlog.server.txn.load import awaiting_markers, load_records
from tierlog.server.txn.schema import encode_key, encode_value
from tierlog.server.txn.state import TxnMetadata, TxnState

TP = TopicPartition("t", 0)


def _meta(tid: str, state: TxnState, epoch: int = 0) -> TxnMetadata:
    parts = frozenset({TP}) if state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT) else frozenset()
    return TxnMetadata(
        transactional_id=tid,
        producer_id=7,
        producer_epoch=epoch,
        timeout_ms=1000,
        state=state,
        partitions=parts,
        start_ms=-1 if state is TxnState.EMPTY else 5,
        last_update_ms=6,
    )


def _record(m: TxnMetadata, version: int = 1) -> tuple[bytes | None, bytes | None]:
    return encode_key(m.transactional_id), encode_value(m.to_log_value(), version)


def test_last_record_wins_and_tombstones_delete() -> None:
    a0, a1 = _meta("a", TxnState.EMPTY), _meta("a", TxnState.ONGOING)
    b = _meta("b", TxnState.PREPARE_COMMIT, epoch=3)
    c = _meta("c", TxnState.COMPLETE_ABORT)
    records = [
        _record(a0),
        _record(b, version=0),
        _record(c),
        _record(a1),
        (encode_key("c"), None),
        (b"\x00\x07junk", b"ignored"),  # a key version we do not know
        (None, b"ignored"),
    ]
    cache = load_records(records)
    assert cache == {"a": a1, "b": b}
    assert awaiting_markers(cache) == [b]


def test_last_producer_epoch_is_not_persisted() -> None:
    m = replace(_meta("a", TxnState.EMPTY, epoch=4), last_producer_epoch=3)
    assert load_records([_record(m)])["a"].last_producer_epoch == -1
