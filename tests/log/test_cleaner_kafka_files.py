"""A compacted topic holding a partition directory in Kafka's own on-disk layout is cleaned
correctly, and a schema-registry-style consumer reads the latest value of every key.

Substitute for the real-Kafka acceptance point (no Kafka distribution is reachable here):
the directory is written by ``tests.log.cleaner_kafka_files`` from Kafka's formats, with
several producers (idempotent, transactional with its COMMIT marker, plain), LogAppendTime
batches, gzip and zstd, headers, three leader epochs, Kafka's index rule and trimmed
indexes, and producer snapshots. A real broker gets the topic created as compacted, is
stopped (cleanly, or killed so the directory is recovered), gets the directory in place of
its own, restarts and cleans it; then, as a schema registry does with ``_schemas``, a fresh
consumer reads the topic from the start up to the high watermark into a table.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

import confluent_kafka as ck
import pytest

from tests.clients.real_clients import create_topic
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.log.cleaner_kafka_files import (
    GZIP,
    NONE,
    ZSTD,
    KafkaPartitionWriter,
    KRecord,
    commit_marker,
    encode_batch,
)
from tierlog.log.checkpoint import read_offsets_checkpoint, read_partition_metadata
from tierlog.log.names import TopicPartition
from tierlog.protocol.records import scan_batches

TOPIC = "_schemas"
TP = TopicPartition(TOPIC, 0)
SEGMENT_BYTES = 4096
SUBJECTS = 8


@dataclass(frozen=True)
class Written:
    offset: int
    key: bytes
    value: bytes | None
    log_append_time: int | None
    headers: tuple[tuple[bytes, bytes | None], ...]


def _schema_key(kind: str, subject: int, version: int = 0) -> bytes:
    return json.dumps(
        {"keytype": kind, "subject": f"subject-{subject}", "version": version, "magic": 1}
    ).encode()


def _kafka_directory(writer: KafkaPartitionWriter, t0: int) -> list[Written]:
    """Twelve rounds of registry writes by four producers; returns every data record."""
    written: list[Written] = []
    sequences = {1000: 0, 1001: 0, 2000: 0}
    config_keys = [_schema_key("CONFIG", s) for s in range(SUBJECTS)]
    schema_keys = [_schema_key("SCHEMA", s, v) for s in range(SUBJECTS) for v in (1, 2)]
    txn_keys = [_schema_key("DELETE_SUBJECT", s) for s in range(SUBJECTS)]
    ts = t0
    for round_ in range(12):
        leader_epoch = round_ // 4 * 2  # 0, 2, 4: epochs need not be consecutive
        deleting = round_ == 11
        for producer in ("idempotent", "append-time", "plain", "transactional"):
            if producer == "transactional":
                keys = txn_keys[round_ % 2 :: 2]
            elif producer == "plain":
                keys = schema_keys[round_ % 3 :: 3]
            else:
                keys = config_keys[(producer == "append-time") :: 2]
            for start in range(0, len(keys), 3):
                chunk = keys[start : start + 3]
                ts += 7
                records = []
                for key in chunk:
                    tombstone = (
                        deleting
                        and producer != "transactional"
                        and (b'"subject-1"' in key or b'"subject-3"' in key)
                    )
                    value = None if tombstone else json.dumps({"r": round_, "p": producer}).encode()
                    headers: tuple[tuple[bytes, bytes | None], ...] = (
                        ((b"schema-registry", b"v%d" % round_), (b"trace", None))
                        if producer == "plain"
                        else ()
                    )
                    records.append(KRecord(key, value, ts, headers))
                base = writer.next_offset
                append_time = ts + 3 if producer == "append-time" else None
                if producer == "idempotent":
                    pid, epoch, codec = 1000, 0, NONE
                elif producer == "append-time":
                    pid, epoch, codec = 1001, 3, GZIP
                elif producer == "transactional":
                    pid, epoch, codec = 2000, 1, ZSTD
                else:
                    pid, epoch, codec = -1, -1, ZSTD
                seq = sequences.get(pid, -1)
                writer.append(
                    encode_batch(
                        base,
                        records,
                        leader_epoch=leader_epoch,
                        codec=codec,
                        producer=(pid, epoch, seq),
                        transactional=producer == "transactional",
                        log_append_time=append_time,
                    )
                )
                if pid in sequences:
                    sequences[pid] += len(records)
                written.extend(
                    Written(base + i, r.key, r.value, append_time, r.headers)
                    for i, r in enumerate(records)
                    if r.key is not None
                )
            if producer == "transactional":
                ts += 1
                writer.append(commit_marker(writer.next_offset, 2000, 1, ts, leader_epoch, 5))
    writer.close()
    return written


def _write_configs(bootstrap: str, later: dict[bytes, bytes], tag: str) -> None:
    """Config updates of three live subjects through a real client, one record a batch."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(60):
        key = _schema_key("CONFIG", i % 3 * 2)
        later[key] = json.dumps({"late": tag, "i": i}).encode()
        p.produce(TOPIC, key=key, value=later[key], partition=0)
        p.flush(10)
    assert p.flush(10) == 0


def _cleaned_up_to(b: BrokerProcess) -> int:
    return read_offsets_checkpoint(b.log_dir / "cleaner-offset-checkpoint").get(TP, -1)


def _read_table(bootstrap: str) -> list[ck.Message]:
    """What a schema registry's store reader does: from the beginning to the high watermark
    seen at the start, every record in order."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "schema-registry",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        tp = ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)
        _low, high = c.get_watermark_offsets(tp, timeout=10)
        c.assign([tp])
        got: list[ck.Message] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
                if (m.offset() or 0) >= high - 1:
                    break
        return got
    finally:
        c.close()


@pytest.mark.parametrize("stop", ["clean", "killed"])
def test_a_kafka_written_partition_is_cleaned_and_read_as_a_table(
    broker_factory: Callable[..., BrokerProcess],
    stop: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    broker = broker_factory({"log.cleaner.backoff.ms": "100"})
    create_topic(
        broker.bootstrap,
        TOPIC,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(SEGMENT_BYTES),
            "index.interval.bytes": "512",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100",
        },
    )
    part_dir = broker.log_dir / f"{TOPIC}-0"
    wait_until((part_dir / "partition.metadata").exists, 10, what="the partition")
    topic_id = read_partition_metadata(part_dir / "partition.metadata")
    assert topic_id is not None
    kafka_dir = tmp_path_factory.mktemp("kafka") / f"{TOPIC}-0"
    writer = KafkaPartitionWriter(kafka_dir, topic_id, SEGMENT_BYTES, 512)
    t0 = int(time.time() * 1000) - 3_600_000
    written = _kafka_directory(writer, t0)
    end = writer.next_offset
    assert len(writer.segments) >= 6
    if stop == "clean":
        broker.stop()
    else:
        broker.kill()
    shutil.rmtree(part_dir)
    shutil.copytree(kafka_dir, part_dir)
    broker.start()

    latest = {w.key: w for w in written}
    gone = {k for k, w in latest.items() if w.value is None}
    assert gone, "the last round deletes two subjects' configs and schemas"
    # the registry goes on writing: its new records seal the segment holding the tombstones
    later: dict[bytes, bytes] = {}
    _write_configs(broker.bootstrap, later, "a")
    wait_until(
        lambda: _cleaned_up_to(broker) > max(latest[k].offset for k in gone),
        60,
        what="a cleaning past the tombstones",
    )
    reached = _cleaned_up_to(broker)
    # delete.retention.ms (100 ms) passes, then more writes make the log dirty again
    retention_over = time.monotonic() + 0.3
    wait_until(lambda: time.monotonic() >= retention_over, 5, what="delete.retention.ms")
    _write_configs(broker.bootstrap, later, "b")
    wait_until(lambda: _cleaned_up_to(broker) > reached, 60, what="a second cleaning")

    messages = _read_table(broker.bootstrap)
    offsets = [m.offset() or 0 for m in messages]
    assert offsets == sorted(set(offsets)), "duplicate or unordered offsets"
    by_offset = {w.offset: w for w in written}
    table: dict[bytes, bytes | None] = {}
    for m in messages:
        key, value, offset = m.key(), m.value(), m.offset()
        assert key is not None and offset is not None
        table[key] = value
        w = by_offset.get(offset)
        if w is None:
            assert offset >= end, f"offset {offset}: not written"
            continue
        assert (key, value) == (w.key, w.value), f"offset {offset} changed"
        kind, ts = m.timestamp()
        if w.log_append_time is not None:
            assert (kind, ts) == (ck.TIMESTAMP_LOG_APPEND_TIME, w.log_append_time)
        else:
            assert kind == ck.TIMESTAMP_CREATE_TIME
        headers = tuple((h[0].encode(), h[1]) for h in m.headers() or [])
        assert headers == w.headers, f"offset {offset}: headers"
    expected = {k: w.value for k, w in latest.items() if w.value is not None} | later
    assert table == expected
    assert not set(table) & gone
    assert not {m.key() for m in messages} & gone, "an expired tombstone is still there"
    assert len(messages) < len(written), "nothing was compacted away"
    broker.stop()
    producers: dict[int, set[tuple[int, str, str, bool]]] = {}
    for segment in sorted(part_dir.glob("*.log")):
        data = segment.read_bytes()
        for h in scan_batches(data):
            if h.base_offset >= end:
                continue
            producers.setdefault(h.producer_id, set()).add(
                (h.producer_epoch, h.compression.name, h.timestamp_type.name, h.is_control)
            )
    assert producers == {
        1000: {(0, "NONE", "CREATE_TIME", False)},
        1001: {(3, "GZIP", "LOG_APPEND_TIME", False)},
        2000: {(1, "ZSTD", "CREATE_TIME", False), (1, "NONE", "CREATE_TIME", True)},
        -1: {(-1, "ZSTD", "CREATE_TIME", False)},
    }, "cleaned batches keep their producer, codec and timestamp type"
