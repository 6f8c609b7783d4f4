"""Which ``__remote_log_metadata`` partition holds a user partition's events.

All events of one user partition must land in one metadata partition so they are totally
ordered. The mapping is Kafka's (``RemoteLogMetadataTopicPartitioner``), so a metadata topic
written by tierlog is laid out as Kafka would lay it out:
``toPositive(murmur2(int32BE(Objects.hash(topicId.lsb, topicId.msb, partition)))) % N``.
"""

from __future__ import annotations

from tierlog.tiered.api import TopicIdPartition

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
MURMUR2_SEED = 0x9747B28C


def _to_int32(v: int) -> int:
    v &= _MASK
    return v - (1 << 32) if v & 0x80000000 else v


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2 with Kafka's seed, as a signed int."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK
    end4 = length & ~3
    for i in range(0, end4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[end4 + 2] << 16
    if rest >= 2:
        h ^= data[end4 + 1] << 8
    if rest >= 1:
        h ^= data[end4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return _to_int32(h)


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


def _java_long_hash(v: int) -> int:
    v &= (1 << 64) - 1
    return _to_int32(v ^ (v >> 32))


def _java_objects_hash(*values: int) -> int:
    """``Objects.hash`` over already-computed element hash codes."""
    result = 1
    for v in values:
        result = _to_int32(31 * result + v)
    return result


def topic_id_partition_hash_bytes(tip: TopicIdPartition) -> bytes:
    """The 4 bytes Kafka hashes for a user partition (independent of ``Uuid.hashCode``)."""
    msb = tip.topic_id.int >> 64
    lsb = tip.topic_id.int & ((1 << 64) - 1)
    h = _java_objects_hash(_java_long_hash(lsb), _java_long_hash(msb), tip.partition)
    return (h & _MASK).to_bytes(4, "big")


class RemoteLogMetadataTopicPartitioner:
    def __init__(self, num_metadata_partitions: int) -> None:
        if num_metadata_partitions <= 0:
            raise ValueError(
                f"number of metadata partitions must be > 0, got {num_metadata_partitions}"
            )
        self.num_metadata_partitions = num_metadata_partitions

    def metadata_partition(self, tip: TopicIdPartition) -> int:
        return (
            to_positive(murmur2(topic_id_partition_hash_bytes(tip))) % self.num_metadata_partitions
        )
