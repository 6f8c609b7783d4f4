"""Requests a cluster answers on a partition's leader only (ListOffsets, DeleteRecords),
sent there the way Kafka's admin client sends them: Metadata names each leader, and the
partitions are batched into one request per leader and topic."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tierlog.client import BrokerConnections, ListedOffset, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


def leaders_of(conn: WireConnection, topics: Sequence[str]) -> dict[TopicPartition, int]:
    """Each partition's leader (-1 while it has none); a topic the cluster lacks has no
    entries."""
    if not topics:
        return {}
    md = conn.call(
        ApiKey.METADATA, 12, topics=[{"name": t} for t in topics], allow_auto_topic_creation=False
    )
    return {
        (str(t.name), int(p.partition_index)): int(p.leader_id)
        for t in md.topics
        if int(t.error_code) == 0
        for p in t.partitions
    }


def _by_leader(
    leaders: Mapping[TopicPartition, int], partitions: Iterable[TopicPartition]
) -> tuple[dict[tuple[int, str], list[int]], list[TopicPartition]]:
    """The partitions grouped by (leader, topic), and those with no known leader."""
    grouped: dict[tuple[int, str], list[int]] = {}
    orphans: list[TopicPartition] = []
    for topic, p in sorted(set(partitions)):
        leader = leaders.get((topic, p), -1)
        if leader < 0:
            orphans.append((topic, p))
        else:
            grouped.setdefault((leader, topic), []).append(p)
    return grouped, orphans


def list_offsets(
    brokers: BrokerConnections,
    leaders: Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition],
    timestamp: int,
    version: int = 7,
) -> dict[TopicPartition, ListedOffset]:
    """ListOffsets (read_uncommitted) for ``timestamp`` on each partition's leader; a
    partition with no leader is answered LEADER_NOT_AVAILABLE without asking."""
    grouped, orphans = _by_leader(leaders, partitions)
    out = {tp: ListedOffset(ErrorCode.LEADER_NOT_AVAILABLE, -1, -1, -1) for tp in orphans}
    for (leader, topic), parts in grouped.items():
        answers = brokers.to(leader).list_offsets(topic, parts, timestamp, version=version)
        out.update({(topic, p): a for p, a in answers.items()})
    return out


def delete_records(
    brokers: BrokerConnections,
    leaders: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, int],
    timeout_ms: int = 30_000,
) -> dict[TopicPartition, tuple[int, int]]:
    """DeleteRecords on each partition's leader: (error code, new low watermark)."""
    grouped, orphans = _by_leader(leaders, offsets)
    out = {tp: (int(ErrorCode.LEADER_NOT_AVAILABLE), -1) for tp in orphans}
    for (leader, topic), parts in grouped.items():
        r = brokers.to(leader).call(
            ApiKey.DELETE_RECORDS,
            2,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "offset": offsets[(topic, p)]} for p in parts
                    ],
                }
            ],
            timeout=timeout_ms,
        )
        for t in r.topics:
            for p in t.partitions:
                out[(str(t.name), int(p.partition_index))] = (
                    int(p.error_code),
                    int(p.low_watermark),
                )
    return out
