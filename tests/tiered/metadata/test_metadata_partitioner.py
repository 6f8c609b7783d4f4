"""murmur2 and the user-partition -> metadata-partition mapping, pinned by vectors computed
outside this code (Kafka's own UtilsTest values, and kafka-python's murmur2)."""

from __future__ import annotations

import uuid

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from tierlog.tiered.api import TopicIdPartition
from tierlog.tiered.metadata.partitioner import (
    RemoteLogMetadataTopicPartitioner,
    murmur2,
    to_positive,
    topic_id_partition_hash_bytes,
)

# Computed with kafka-python's murmur2 over Objects.hash written out by hand.
PINNED = [39, 47, 49, 33, 23, 40]

# Apache Kafka clients/src/test/.../utils/UtilsTest.testMurmur2.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_empty_input_is_the_seed_mix() -> None:
    assert to_positive(murmur2(b"")) == 275646681


@pytest.mark.parametrize("n", range(0, 40))
def test_murmur2_agrees_with_kafka_python_for_every_tail_length(n: int) -> None:
    data = bytes((i * 37 + n) & 0xFF for i in range(n))
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(bytearray(data))


def test_to_positive_clears_sign_bit_rather_than_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0


def java_objects_hash_by_hand(msb: int, lsb: int, partition: int) -> int:
    """Objects.hash(Long lsb, Long msb, Integer p) written out as Java evaluates it."""

    def long_hash(v: int) -> int:
        return (v ^ (v >> 32)) & 0xFFFFFFFF

    r = 1
    for h in (long_hash(lsb), long_hash(msb), partition & 0xFFFFFFFF):
        r = (31 * r + h) & 0xFFFFFFFF
    return r


@pytest.mark.parametrize(
    ("msb", "lsb", "partition"),
    [(0, 0, 0), (0, 0, 7), (1, 2, 3), (0xFFFFFFFFFFFFFFFF, 0x8000000000000001, 49)],
)
def test_hash_bytes_follow_objects_hash(msb: int, lsb: int, partition: int) -> None:
    tip = TopicIdPartition(uuid.UUID(int=(msb << 64) | lsb), "t", partition)
    expected = java_objects_hash_by_hand(msb, lsb, partition).to_bytes(4, "big")
    assert topic_id_partition_hash_bytes(tip) == expected


def test_all_zero_topic_id_partition_zero_hashes_to_29791() -> None:
    tip = TopicIdPartition(uuid.UUID(int=0), "t", 0)
    assert topic_id_partition_hash_bytes(tip) == (29791).to_bytes(4, "big")


def test_metadata_partition_matches_independent_computation() -> None:
    tips = [
        TopicIdPartition(uuid.UUID("6b0f4a0e-2b7e-4a51-9c1e-0f3d5a7c9e11"), "orders", p)
        for p in range(20)
    ]
    part = RemoteLogMetadataTopicPartitioner(50)
    for tip in tips:
        msb, lsb = tip.topic_id.int >> 64, tip.topic_id.int & (2**64 - 1)
        key = java_objects_hash_by_hand(msb, lsb, tip.partition).to_bytes(4, "big")
        expected = (kafka_python_murmur2(bytearray(key)) & 0x7FFFFFFF) % 50
        assert part.metadata_partition(tip) == expected


def test_metadata_partition_pinned_values() -> None:
    topic_id = uuid.UUID("6b0f4a0e-2b7e-4a51-9c1e-0f3d5a7c9e11")
    part = RemoteLogMetadataTopicPartitioner(50)
    got = [part.metadata_partition(TopicIdPartition(topic_id, "orders", p)) for p in range(6)]
    assert got == PINNED


def test_topic_name_does_not_affect_mapping() -> None:
    topic_id = uuid.uuid4()
    part = RemoteLogMetadataTopicPartitioner(50)
    a = part.metadata_partition(TopicIdPartition(topic_id, "a", 3))
    assert a == part.metadata_partition(TopicIdPartition(topic_id, "renamed", 3))


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="> 0"):
        RemoteLogMetadataTopicPartitioner(0)
