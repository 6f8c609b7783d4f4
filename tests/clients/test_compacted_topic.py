"""Connect-style use of a compacted topic through real clients and a real broker.

kafka-python and confluent-kafka write keyed updates and tombstones to a topic created with
``cleanup.policy=compact``, small segments and a low dirty ratio; once the broker's cleaner
has run, a fresh consumer of each client reads the topic from the start and rebuilds the
table: the latest value of every live key, at the offset it was written at, and fewer
records than were written (the log has gaps).
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import confluent_kafka as ck
import kafka

from tests.clients.real_clients import create_topic
from tests.helpers.broker import BrokerProcess
from tests.helpers.confluent import read_to_high_watermark
from tests.helpers.poll import wait_until

TOPIC = "table"
KEYS = [b"key-%02d" % i for i in range(20)]
Written = dict[bytes, tuple[int, bytes | None]]
"""key -> (offset, value or None for a tombstone) of its latest write."""


def _write_kafka_python(bootstrap: str, round_: int, latest: Written) -> None:
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=0)
    try:
        for key in KEYS:
            value = None if (round_ + KEYS.index(key)) % 7 == 0 else b"kp-%d-%s" % (round_, key)
            meta = p.send(TOPIC, key=key, value=value, partition=0).get(timeout=30)
            latest[key] = (meta.offset, value)
    finally:
        p.close(10)


def _write_confluent(bootstrap: str, round_: int, latest: Written) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": "lz4"})
    for key in KEYS:
        value = None if (round_ + KEYS.index(key)) % 5 == 0 else b"ck-%d-%s" % (round_, key)

        def delivered(
            err: object, msg: ck.Message, key: bytes = key, value: bytes | None = value
        ) -> None:
            assert err is None, err
            offset = msg.offset()
            assert offset is not None
            latest[key] = (offset, value)

        p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=delivered)
        assert p.flush(30) == 0


def _write_other_keys(bootstrap: str, tag: str, latest: Written) -> None:
    """Three rounds of values for the keys after the first ten (several segments' worth)."""
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for round_ in range(3):
            for key in KEYS[10:]:
                value = b"%s-%d-%s" % (tag.encode(), round_, key)
                latest[key] = (p.send(TOPIC, key=key, value=value).get(timeout=30).offset, value)
    finally:
        p.close(10)


def _read_confluent(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    return read_to_high_watermark(bootstrap, TOPIC)


def _read_kafka_python(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    c = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        high = c.end_offsets([tp])[tp]
        rows: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 30
        while c.position(tp) < high and time.monotonic() < deadline:
            for m in c.poll(timeout_ms=200).get(tp, []):
                rows.append((m.offset, m.key, m.value))
        return rows
    finally:
        c.close()


def _cleaned_up_to(broker: BrokerProcess) -> int:
    path = broker.log_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        topic, part, offset = line.split(" ")
        if (topic, part) == (TOPIC, "0"):
            return int(offset)
    return -1


def test_compacted_topic_reads_as_a_table(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"log.cleaner.backoff.ms": "100", "log.cleaner.threads": "2"})
    create_topic(
        broker.bootstrap,
        TOPIC,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": "2048",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100",
        },
    )
    latest: Written = {}
    written = 0
    for round_ in range(8):
        writer = _write_kafka_python if round_ % 2 == 0 else _write_confluent
        writer(broker.bootstrap, round_, latest)
        written += len(KEYS)
    end = max(offset for offset, _ in latest.values()) + 1
    assert end == written
    wait_until(lambda: _cleaned_up_to(broker) > end // 2, timeout_s=60, what="a cleaning")
    expected = {k: (o, v) for k, (o, v) in latest.items() if v is not None}
    for read in (_read_confluent, _read_kafka_python):
        rows = read(broker.bootstrap)
        offsets = [o for o, _, _ in rows]
        assert offsets == sorted(set(offsets)), read.__name__
        assert len(rows) < written, f"{read.__name__}: nothing was compacted away"
        table: dict[bytes, tuple[int, bytes | None]] = {}
        for offset, key, value in rows:
            table[key] = (offset, value)
        live = {k: ov for k, ov in table.items() if ov[1] is not None}
        assert live == expected, read.__name__
    # tombstones go delete.retention.ms after the cleaning that reached them, at the next
    # cleaning: updates to other keys seal the segments holding them and dirty the log again
    gone = {k for k, (_, v) in latest.items() if v is None and k in KEYS[:10]}
    assert gone, "the writes above leave some tombstones as the latest record of a key"
    last_tombstone = max(latest[k][0] for k in gone)
    _write_other_keys(broker.bootstrap, "filler", latest)
    wait_until(
        lambda: _cleaned_up_to(broker) > last_tombstone, timeout_s=60, what="tombstones reached"
    )
    reached = _cleaned_up_to(broker)
    # the tombstones may go once delete.retention.ms (100 ms) has passed since that cleaning
    retention_over = time.monotonic() + 0.3
    wait_until(lambda: time.monotonic() >= retention_over, 5, what="delete.retention.ms")
    _write_other_keys(broker.bootstrap, "late", latest)
    new_end = max(offset for offset, _ in latest.values()) + 1
    wait_until(lambda: _cleaned_up_to(broker) > reached, timeout_s=60, what="a second cleaning")
    rows = _read_confluent(broker.bootstrap)
    assert not {key for _, key, _ in rows} & gone, "expired tombstones are still there"
    assert {k: (o, v) for o, k, v in rows if v is not None and o < new_end} == {
        k: ov for k, ov in latest.items() if ov[1] is not None
    }
    metrics = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    assert "tierlog_log_cleaner_max_dirty_percent" in metrics
    assert "tierlog_log_cleaner_uncleanable_partitions_count 0.0" in metrics
