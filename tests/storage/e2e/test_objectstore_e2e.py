"""Broker + S3 server end to end: tiering with compression and encryption, consumption of
everything from the remote tier, and a tampered chunk that fails only its own partition."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import KafkaError

from tests.storage.e2e.objectstore_broker import (
    SEGMENT_BYTES,
    ObjectStoreBroker,
    expected_records,
    tiered_topic_configs,
)
from tierlog.storage.objectstore.manifest import SegmentManifest

PARTITIONS = 3
RECORDS = 2500  # 8-10 segments of 64 KiB per partition, 3+ when lz4-compressed


def _objects(client: Any, bucket: str, topic: str, suffix: str) -> list[str]:
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="tiered/"):
        keys += [o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(suffix)]
    return sorted(k for k in keys if f"/{topic}-" in k)


def _partition_of(key: str) -> int:
    return int(key.rsplit("/", 2)[1])


def _fill(b: ObjectStoreBroker, topic: str) -> None:
    b.create_topic(topic, PARTITIONS, tiered_topic_configs())
    for p in range(PARTITIONS):
        # the last partition's producer compresses its batches itself (lz4): the plugin's
        # heuristic stores those chunks without zstd
        b.produce(topic, p, RECORDS, compression="lz4" if p == PARTITIONS - 1 else "none")
    b.wait_fully_tiered(topic, PARTITIONS)


def test_all_records_are_consumed_back_from_encrypted_compressed_s3(
    encrypted_s3: tuple[ObjectStoreBroker, Any, str],
) -> None:
    b, client, bucket = encrypted_s3
    topic = "os-roundtrip"
    _fill(b, topic)
    remote_end = {p: b.local_segments(topic, p)[0] for p in range(PARTITIONS)}
    assert all(end > RECORDS * 0.9 for end in remote_end.values()), remote_end

    # what is in the bucket is encrypted (no plaintext) and, for plain batches, compressed
    manifests = _objects(client, bucket, topic, ".rsm-manifest")
    logs = _objects(client, bucket, topic, ".log")
    assert len(manifests) == len(logs)
    per_partition = [sum(_partition_of(k) == p for k in logs) for p in range(PARTITIONS)]
    assert min(per_partition) >= 3, per_partition
    compressed_somewhere = False
    for key in manifests:
        raw = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        doc = json.loads(raw)
        assert doc["encryption"]["cipher"] == "AES-256-GCM" and doc["encryption"]["keyId"] == "k1"
        manifest = SegmentManifest.from_json_bytes(raw)
        chunks = manifest.chunk_index.chunk_count
        flags = [manifest.is_compressed(i) for i in range(chunks)]
        if _partition_of(key) == PARTITIONS - 1:
            assert not any(flags), key  # producer-compressed batches are left alone
        elif any(flags):
            compressed_somewhere = True
    assert compressed_somewhere
    sample = client.get_object(Bucket=bucket, Key=logs[0])["Body"].read()
    assert b"page_view" not in sample and len(sample) < SEGMENT_BYTES + 64

    for p in range(PARTITIONS):
        got = b.consume(topic, p, RECORDS)
        assert not got.errors, got.errors
        assert got.records == expected_records(p, RECORDS), f"partition {p}"


def test_a_tampered_chunk_fails_that_partition_only(
    encrypted_s3: tuple[ObjectStoreBroker, Any, str],
) -> None:
    b, client, bucket = encrypted_s3
    topic = "os-tamper"
    _fill(b, topic)
    victim = 1
    manifests = _objects(client, bucket, topic, ".rsm-manifest")
    manifest_key = [k for k in manifests if _partition_of(k) == victim][2]  # 3rd segment
    log_key = manifest_key.removesuffix(".rsm-manifest") + ".log"
    manifest = SegmentManifest.from_json_bytes(
        client.get_object(Bucket=bucket, Key=manifest_key)["Body"].read()
    )
    assert manifest.chunk_index.chunk_count >= 2
    start, end = manifest.chunk_index.stored_range(1)
    body = bytearray(client.get_object(Bucket=bucket, Key=log_key)["Body"].read())
    body[(start + end) // 2] ^= 0x5A  # one flipped bit pattern inside chunk 1's ciphertext
    client.put_object(Bucket=bucket, Key=log_key, Body=bytes(body))
    tampered_from = int(log_key.rsplit("/", 1)[1].split("-", 1)[0])

    got = b.consume(topic, victim, RECORDS)
    assert got.errors, "the consumer of the tampered partition saw no error"
    assert got.errors[0].code() == KafkaError.UNKNOWN  # UNKNOWN_SERVER_ERROR, as Kafka
    assert "CorruptDataError" in b.broker.stderr and log_key in b.broker.stderr
    # everything before the tampered chunk was delivered intact, nothing after it
    assert got.records == expected_records(victim, len(got.records))
    assert tampered_from <= len(got.records) < RECORDS

    for p in range(PARTITIONS):
        if p == victim:
            continue
        other = b.consume(topic, p, RECORDS)
        assert not other.errors, other.errors
        assert other.records == expected_records(p, RECORDS), f"partition {p}"
    assert b.broker.running
