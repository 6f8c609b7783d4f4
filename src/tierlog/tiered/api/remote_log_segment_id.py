"""Unique identity of one upload attempt of one segment."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tierlog.tiered.api.topic_id_partition import TopicIdPartition


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """A user partition plus a random id, fresh for every copy attempt.

    Because a retried upload gets a new id, copies never collide on object names and an
    abandoned attempt can be cleaned up by id without coordinating with the new one.
    """

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate_new(cls, topic_id_partition: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(topic_id_partition, uuid.uuid4())

    def __str__(self) -> str:
        return f"{self.topic_id_partition}:{self.id}"
