"""The log cleaner and transactions (Kafka's CleanedTransactionMetadata rules, LogCleanerTest
transaction cases adapted): aborted data is removed, markers stay while a batch of their
transaction does and then, like tombstones, until ``delete.retention.ms`` after cleaning
found them removable; the cleaned ``.txnindex`` keeps the aborts whose markers it keeps."""

from __future__ import annotations

from dataclasses import replace

from tests.log.cleaner_helpers import clean_fully, make_cleaner
from tests.log.log_helpers import TOPIC_ID, TP, ManagerFactory, ManualClock
from tierlog.log import LogConfig, PartitionLog
from tierlog.log.txn_index import AbortedTxn
from tierlog.protocol.records import (
    BatchHeader,
    SimpleRecord,
    build_batch,
    iter_records,
    scan_batches,
)

A, B = 1, 2
COMPACT = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=1024,
    min_cleanable_dirty_ratio=0.01,
    file_delete_delay_ms=0,
    delete_retention_ms=60_000,
)


class _Producers:
    def __init__(self, plog: PartitionLog, clock: ManualClock) -> None:
        self.plog = plog
        self.clock = clock
        self.seq: dict[int, int] = {}

    def send(self, key: bytes, value: bytes, pid: int = -1) -> int:
        seq = self.seq.get(pid, 0) if pid >= 0 else -1
        data = build_batch(
            [SimpleRecord(value, key, self.clock.now)],
            timestamp=self.clock.now,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
            transactional=pid >= 0,
        )
        if pid >= 0:
            self.seq[pid] = seq + 1
        return self.plog.append_as_leader(data, 0).base_offset

    def end(self, pid: int, commit: bool) -> int:
        return self.plog.append_txn_marker(pid, 0, 0, committed=commit, leader_epoch=0).base_offset


def _batches(plog: PartitionLog) -> list[tuple[BatchHeader, bytes]]:
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20, upper_bound="leo").to_bytes()
        if not data:
            break
        for h in scan_batches(data):
            out.append((h, data[h.position : h.end]))
            offset = h.next_offset
    return out


def _markers(plog: PartitionLog) -> list[int]:
    return [h.base_offset for h, _ in _batches(plog) if h.is_control and h.records_count]


def _rows(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.key, r.value)
        for h, data in _batches(plog)
        if not h.is_control
        for r in iter_records(data)
    ]


def test_aborted_data_goes_and_markers_follow_their_transactions(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, COMPACT)
    w = _Producers(plog, clock)
    w.send(b"k1", b"a1", A)  # 0
    w.send(b"k2", b"a2", A)  # 1
    commit_a = w.end(A, True)  # 2
    w.send(b"k1", b"b1", B)  # 3
    w.send(b"k3", b"b3", B)  # 4
    abort_b = w.end(B, False)  # 5
    w.send(b"k2", b"p2")  # 6
    w.send(b"k4", b"b4", B)  # 7: B's last batch from now on
    commit_b = w.end(B, True)  # 8
    plog.roll()
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    assert clean_fully(service, worker, clock.now) >= 1

    assert _rows(plog) == [(0, b"k1", b"a1"), (6, b"k2", b"p2"), (7, b"k4", b"b4")]
    assert _markers(plog) == [commit_a, abort_b, commit_b]
    assert plog.collect_aborted_txns(0, plog.log_end_offset)[0] == [AbortedTxn(B, 3, 5, 6)]

    # B's aborted batches are gone: its ABORT marker is no longer needed.
    w.send(b"k1", b"p1")  # 9
    plog.roll()
    clock.advance(1)
    assert clean_fully(service, worker, clock.now) >= 1
    assert _markers(plog) == [commit_a, abort_b, commit_b]  # removable, horizon set
    assert plog.collect_aborted_txns(0, plog.log_end_offset)[0] == []
    clock.advance(COMPACT.delete_retention_ms + 1)
    w.send(b"k9", b"p9")  # 10: something to clean
    plog.roll()
    assert clean_fully(service, worker, clock.now) >= 1
    # A's last batch stays as an empty batch (its producer's sequence), so its COMMIT does
    assert _markers(plog) == [commit_a, commit_b]
    assert _rows(plog) == [
        (6, b"k2", b"p2"),
        (7, b"k4", b"b4"),
        (9, b"k1", b"p1"),
        (10, b"k9", b"p9"),
    ]


def test_cleaning_stops_at_an_open_transaction(
    make_manager: ManagerFactory, clock: ManualClock
) -> None:
    mgr = make_manager()
    plog = mgr.create_log(TP, TOPIC_ID, replace(COMPACT, segment_bytes=200))
    w = _Producers(plog, clock)
    w.send(b"k1", b"v1")
    w.send(b"k1", b"open", A)  # an open transaction: the LSO
    for i in range(6):
        w.send(b"k1", b"later-%d" % i)
    plog.roll()
    assert plog.last_stable_offset == 1
    service, worker = make_cleaner(mgr.logs_by_dir(), clock)
    clean_fully(service, worker, clock.now)
    assert [(o, v) for o, _, v in _rows(plog)][:2] == [(0, b"v1"), (1, b"open")]
    w.end(A, False)
    plog.roll()
    clean_fully(service, worker, clock.now)
    values = [v for _, _, v in _rows(plog)]
    assert b"open" not in values
    assert values[-1] == b"later-5"
