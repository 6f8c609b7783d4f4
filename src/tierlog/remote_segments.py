"""``tierlog remote segments``: the remote segments of a topic, read as a Kafka client.

The source of truth is ``__remote_log_metadata``: the tool reads the metadata partitions the
topic's partitions hash to (same partitioner as the broker), from the log start to the end
taken before reading, each from its leader as a Kafka consumer does (in a cluster the
bootstrap broker leads only some of them), and folds the records into the broker's own
cache type (``tiered.metadata.fold``). Listed are the segments the cache lists: COPY_STARTED,
COPY_FINISHED and DELETE_STARTED (a DELETE_FINISHED segment no longer exists).
"""

from __future__ import annotations

import uuid
from typing import Any

from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.tiered.api import RemoteLogSegmentMetadata, TopicIdPartition
from tierlog.tiered.metadata.fold import MetadataLogReader, fold_metadata_partitions
from tierlog.tiered.metadata.topic_io import METADATA_TOPIC

__all__ = ["RemoteSegmentsError", "remote_segments", "segment_row"]

FETCH_BYTES = 4 << 20
#: The client id the tool's connections to partition leaders announce.
CLIENT_ID = "tierlog-cli"


class RemoteSegmentsError(RuntimeError):
    pass


def _metadata(c: WireConnection, topics: list[str]) -> Any:
    return c.call(
        ApiKey.METADATA, 12, topics=[{"name": t} for t in topics], allow_auto_topic_creation=False
    )


def _offset(c: WireConnection, topic: str, partition: int, timestamp: int) -> int:
    r = c.list_offset(topic, partition, timestamp, version=7)
    if r.error_code != 0:
        raise RemoteSegmentsError(
            f"list offsets {topic}-{partition}: {ErrorCode(r.error_code).name}"
        )
    return r.offset


class _WireMetadataReader(MetadataLogReader):
    """Reads each metadata partition on its leader (``leaders``: partition to node id; one
    not listed is read through the bootstrap connection)."""

    def __init__(self, brokers: BrokerConnections, leaders: dict[int, int]) -> None:
        self._brokers = brokers
        self._leaders = leaders

    def _on(self, partition: int) -> WireConnection:
        leader = self._leaders.get(partition)
        return self._brokers.bootstrap if leader is None else self._brokers.to(leader)

    def offsets(self, partition: int) -> tuple[int, int]:
        c = self._on(partition)
        start = _offset(c, METADATA_TOPIC, partition, -2)
        return start, _offset(c, METADATA_TOPIC, partition, -1)

    def read(
        self, partition: int, offset: int, end: int
    ) -> tuple[list[tuple[int, bytes | None]], int]:
        code, data = self._on(partition).fetch_raw(METADATA_TOPIC, partition, offset, FETCH_BYTES)
        if code != 0:
            raise RemoteSegmentsError(
                f"fetch {METADATA_TOPIC}-{partition} at {offset}: {ErrorCode(code).name}"
            )
        records: list[tuple[int, bytes | None]] = []
        nxt = offset
        for h in scan_batches(data):
            records.extend((r.offset, r.value) for r in iter_records(data[h.position : h.end]))
            nxt = max(nxt, h.last_offset + 1)
        return records, nxt


def segment_row(md: RemoteLogSegmentMetadata) -> dict[str, Any]:
    return {
        "partition": md.topic_id_partition.partition,
        "segment_id": str(md.remote_log_segment_id.id),
        "start_offset": md.start_offset,
        "end_offset": md.end_offset,
        "state": md.state.name,
        "size_bytes": md.segment_size_in_bytes,
        "leader_epochs": [[e, o] for e, o in sorted(md.segment_leader_epochs.items())],
        "max_timestamp_ms": md.max_timestamp_ms,
        "broker_id": md.broker_id,
    }


def remote_segments(
    c: WireConnection, topic: str, partition: int | None = None
) -> list[dict[str, Any]]:
    """Rows of ``segment_row`` for the topic (or one partition), by partition and offset."""
    md = _metadata(c, [topic, METADATA_TOPIC])
    found = {t.name: t for t in md.topics}
    t = found.get(topic)
    if t is None or t.error_code != 0:
        code = ErrorCode(int(t.error_code)).name if t is not None else "UNKNOWN_TOPIC_OR_PARTITION"
        raise RemoteSegmentsError(f"describe {topic}: {code}")
    meta = found.get(METADATA_TOPIC)
    if meta is None or meta.error_code != 0 or not meta.partitions:
        return []  # no tiering on this broker yet
    partitions = sorted(p.partition_index for p in t.partitions)
    if partition is not None:
        if partition not in partitions:
            raise RemoteSegmentsError(f"{topic} has no partition {partition}")
        partitions = [partition]
    topic_id = uuid.UUID(str(t.topic_id))
    tips = [TopicIdPartition(topic_id, topic, p) for p in partitions]
    brokers = BrokerConnections(c, md, CLIENT_ID)
    leaders = {int(p.partition_index): int(p.leader_id) for p in meta.partitions}
    try:
        caches = fold_metadata_partitions(
            _WireMetadataReader(brokers, leaders), len(meta.partitions), tips
        )
    finally:
        brokers.close()
    rows = [
        segment_row(md) for cache in caches.values() for md in cache.list_all_remote_log_segments()
    ]
    rows.sort(key=lambda r: (r["partition"], r["start_offset"]))
    return rows
