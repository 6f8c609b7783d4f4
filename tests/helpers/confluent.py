"""confluent-kafka as a test consumer of one assigned partition (no group membership)."""

from __future__ import annotations

import time

import confluent_kafka as ck


def consume_assigned(
    bootstrap: str,
    topic: str,
    partition: int,
    count: int,
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
) -> list[ck.Message]:
    """The first ``count`` records of one partition, read from its beginning by a consumer
    assigned to it; fewer if ``timeout_s`` passes first. A record with an error fails."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "assign-only",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        c.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
        got: list[ck.Message] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(poll_s)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
        return got
    finally:
        c.close()


def read_to_high_watermark(
    bootstrap: str, topic: str, partition: int = 0, *, timeout_s: float = 30.0
) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record of one partition, read from its beginning until
    the record before the high watermark seen at the start (or ``timeout_s``). Every record
    must have a key (a compacted topic's)."""
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        _, high = c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=timeout_s)
        c.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
        rows: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and (not rows or rows[-1][0] < high - 1):
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            offset, key = m.offset(), m.key()
            assert offset is not None and key is not None
            rows.append((offset, key, m.value()))
        return rows
    finally:
        c.close()
