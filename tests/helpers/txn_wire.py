"""Transactions over the raw wire, for tests that play the coordinator themselves: a
transactional Produce, WriteTxnMarkers as the coordinator sends it, a read_committed Fetch,
and the filtering a Kafka consumer applies to what that Fetch returns."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.fetch_request import fetch_fields
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches
from tierlog.protocol.txn_markers import marker_of_batch

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
#: Broker overrides for tests that play the coordinator: with KIP-890 verification on (the
#: default) a transactional write the real coordinator never heard of is refused.
NO_VERIFICATION = {"transaction.partition.verification.enable": "false"}
#: What ``TxnWriter`` appends to every value (records of a realistic size).
PAD = b"." * 64


def produce_txn(
    conn: WireConnection,
    topic: str,
    partition: int,
    values: Sequence[bytes],
    *,
    producer_id: int,
    epoch: int = 0,
    sequence: int = 0,
    transactional_id: str | None = "txn",
    transactional: bool = True,
    timestamp: int | None = None,
) -> tuple[int, int]:
    """One Produce v9 (acks=-1) of one batch (timestamped now unless ``timestamp``);
    returns (error code, base offset)."""
    records = build_batch(
        [SimpleRecord(v) for v in values],
        timestamp=time.time_ns() // 1_000_000 if timestamp is None else timestamp,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=transactional,
    )
    r = conn.call(
        ApiKey.PRODUCE,
        9,
        transactional_id=transactional_id,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    )
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def write_markers(
    conn: WireConnection,
    partitions: Sequence[tuple[str, int]],
    *,
    producer_id: int,
    epoch: int = 0,
    commit: bool,
    coordinator_epoch: int = 0,
    version: int = 1,
) -> dict[tuple[str, int], int]:
    """One WriteTxnMarkers with one marker; each partition's error code."""
    topics: dict[str, list[int]] = {}
    for name, index in partitions:
        topics.setdefault(name, []).append(index)
    r = conn.call(
        ApiKey.WRITE_TXN_MARKERS,
        version,
        markers=[
            {
                "producer_id": producer_id,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "topics": [{"name": n, "partition_indexes": ix} for n, ix in topics.items()],
                "coordinator_epoch": coordinator_epoch,
            }
        ],
    )
    return {
        (t.name, int(p.partition_index)): int(p.error_code)
        for m in r.markers
        for t in m.topics
        for p in t.partitions
    }


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    records: bytes
    aborted: list[tuple[int, int]] | None


def fetch(
    conn: WireConnection,
    topic: str,
    partition: int,
    offset: int,
    *,
    isolation_level: int = READ_COMMITTED,
    max_bytes: int = 4 << 20,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
) -> FetchedPartition:
    """One sessionless Fetch v12 (no wait unless ``max_wait_ms`` and ``min_bytes``)."""
    r = conn.call(
        ApiKey.FETCH,
        12,
        **fetch_fields(
            topic,
            partition,
            offset,
            max_bytes,
            isolation_level=isolation_level,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
        ),
    )
    p = r.responses[0].partitions[0]
    aborted = (
        None
        if p.aborted_transactions is None
        else [(int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions]
    )
    return FetchedPartition(
        int(p.error_code),
        int(p.high_watermark),
        int(p.last_stable_offset),
        bytes(p.records or b""),
        aborted,
    )


def visible(records: bytes, aborted: Sequence[tuple[int, int]] | None) -> list[bytes | None]:
    """What a read_committed Kafka consumer delivers from one Fetch: aborted transactions'
    batches dropped (a producer is aborted from its entry's first offset until its ABORT
    marker), control batches never delivered."""
    pending = sorted((first, pid) for pid, first in aborted or [])
    aborted_producers: set[int] = set()
    out: list[bytes | None] = []
    for h in scan_batches(records):
        while pending and pending[0][0] <= h.last_offset:
            aborted_producers.add(pending.pop(0)[1])
        data = records[h.position : h.end]
        if h.is_control:
            marker = marker_of_batch(data, h._replace(position=0))
            if marker is not None and not marker.committed:
                aborted_producers.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborted_producers:
            continue
        out.extend(r.value for r in iter_records(data))
    return out


def consume_committed(
    conn: WireConnection, topic: str, partition: int, start: int = 0
) -> tuple[list[bytes | None], int]:
    """Every committed value from ``start`` up to the LSO, fetching as a consumer does;
    returns (values, the LSO reached)."""
    values: list[bytes | None] = []
    offset = start
    while True:
        got = fetch(conn, topic, partition, offset)
        assert got.error_code == 0, got.error_code
        if not got.records:
            return values, got.last_stable_offset
        assert got.aborted is not None
        values.extend(visible(got.records, got.aborted))
        offset = scan_batches(got.records)[-1].next_offset


class TxnWriter:
    """Producers (one pid each) writing one record per batch, and their markers.

    Timestamps strictly increase and follow the markers' (the broker's clock), so each batch
    adds a time-index entry and segments roll every ``N`` batches, as in the recipe."""

    def __init__(self, conn: WireConnection, topic: str) -> None:
        self.conn = conn
        self.topic = topic
        self.sequences: dict[int, int] = {}
        self.last_ts = 0

    def send(self, pid: int, value: bytes, *, transactional: bool = True) -> int:
        seq = self.sequences.get(pid, 0)
        self.last_ts = max(self.last_ts + 1, time.time_ns() // 1_000_000 + 1)
        code, offset = produce_txn(
            self.conn,
            self.topic,
            0,
            [value + PAD],
            producer_id=pid,
            sequence=seq,
            transactional=transactional,
            transactional_id=f"t-{pid}" if transactional else None,
            timestamp=self.last_ts,
        )
        assert code == 0, code
        self.sequences[pid] = seq + 1
        return offset

    def end(self, pid: int, *, commit: bool) -> None:
        codes = write_markers(self.conn, [(self.topic, 0)], producer_id=pid, commit=commit)
        assert codes == {(self.topic, 0): 0}


def list_offset(
    conn: WireConnection, topic: str, partition: int, timestamp: int, *, isolation_level: int
) -> tuple[int, int]:
    """One ListOffsets v9 lookup: (error code, offset)."""
    r = conn.call(
        ApiKey.LIST_OFFSETS,
        9,
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "current_leader_epoch": -1,
                        "timestamp": timestamp,
                    }
                ],
            }
        ],
    )
    p = r.topics[0].partitions[0]
    return int(p.error_code), int(p.offset)
