"""Object naming: where the three objects of a segment live in the bucket.

``<prefix>[<hash>/]<topic>-<topicId>/<partition>/<20-digit start offset>-<segment id>.<suffix>``

(a topic name too long to fit one 255-byte path component is shortened, see
``topic_dir_name``).

Ids are rendered like Kafka's ``Uuid.toString()`` (22-char URL-safe base64) so keys match
the Aiven layout and stay short. The optional hash directory is derived from the partition
directory, so all objects of a partition stay under one listable prefix while different
partitions spread over the store's key space (S3 scales request rates per prefix).
"""

from __future__ import annotations

import base64
import re
import uuid
import zlib
from dataclasses import dataclass

from tierlog.tiered.api import ObjectKind, RemoteLogSegmentMetadata, SegmentObject, TopicIdPartition

LOG_SUFFIX = ".log"
INDEXES_SUFFIX = ".indexes"
MANIFEST_SUFFIX = ".rsm-manifest"

_KIND_OF_SUFFIX = {
    LOG_SUFFIX: ObjectKind.LOG,
    INDEXES_SUFFIX: ObjectKind.INDEX,
    MANIFEST_SUFFIX: ObjectKind.MANIFEST,
}
_ID = r"[A-Za-z0-9_-]{22}"  # a Kafka Uuid as Uuid.toString() renders it
#: ``[<prefix>][<hash>/]<topic>-<topicId>/<partition>/<20-digit offset>-<segmentId><suffix>``
_SEGMENT_KEY = re.compile(
    rf"(?:^|/)(?P<topic>[^/]+)-(?P<tid>{_ID})/(?P<partition>\d+)/\d{{20}}-(?P<sid>{_ID})"
    rf"(?P<suffix>{'|'.join(map(re.escape, _KIND_OF_SUFFIX))})$"
)


def kafka_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


#: Longest key component most file systems accept (NAME_MAX).
_MAX_COMPONENT = 255


def topic_dir_name(topic: str, topic_id: uuid.UUID) -> str:
    """``<topic>-<topicId>``; a topic name too long for one path component (Kafka allows
    249 characters, plus 23 for the id) is cut and tagged with a hash of the full name.
    The topic id keeps the name unique either way."""
    tail = f"-{kafka_uuid(topic_id)}"
    name = topic + tail
    if len(name.encode()) <= _MAX_COMPONENT:
        return name
    digest = f"~{zlib.crc32(topic.encode()):08x}"
    keep = _MAX_COMPONENT - len(tail) - len(digest)
    return topic.encode()[:keep].decode(errors="ignore") + digest + tail


def partition_dir(tip: TopicIdPartition) -> str:
    return f"{topic_dir_name(tip.topic, tip.topic_id)}/{tip.partition}/"


def hash_dir(partition_directory: str, mask: int) -> str:
    """The hash directory for a partition ("" when the mask is 0)."""
    if mask == 0:
        return ""
    width = (mask.bit_length() + 3) // 4
    value = zlib.crc32(partition_directory.encode()) & mask
    return f"{value:0{width}x}/"


@dataclass(frozen=True, slots=True)
class SegmentKeys:
    """The object keys of one segment; ``base`` has no suffix."""

    base: str

    @property
    def log(self) -> str:
        return self.base + LOG_SUFFIX

    @property
    def indexes(self) -> str:
        return self.base + INDEXES_SUFFIX

    @property
    def manifest(self) -> str:
        return self.base + MANIFEST_SUFFIX

    def all(self) -> list[str]:
        return [self.log, self.indexes, self.manifest]


def segment_keys(prefix: str, mask: int, metadata: RemoteLogSegmentMetadata) -> SegmentKeys:
    segment_id = metadata.remote_log_segment_id
    pdir = partition_dir(segment_id.topic_id_partition)
    name = f"{metadata.start_offset:020d}-{kafka_uuid(segment_id.id)}"
    return SegmentKeys(f"{prefix}{hash_dir(pdir, mask)}{pdir}{name}")


def identify_key(key: str) -> SegmentObject | None:
    """The segment object ``key`` names, or None for a key of another shape; the topic name
    is None when ``topic_dir_name`` shortened it (the manifest holds it whole)."""
    match = _SEGMENT_KEY.search(key)
    if match is None:
        return None
    suffix = match.group("suffix")
    topic = match.group("topic")
    return SegmentObject(
        topic_id=parse_kafka_uuid(match.group("tid")),
        partition=int(match.group("partition")),
        segment_id=parse_kafka_uuid(match.group("sid")),
        kind=_KIND_OF_SUFFIX[suffix],
        segment_key=key[: -len(suffix)],
        topic=None if "~" in topic else topic,
    )
