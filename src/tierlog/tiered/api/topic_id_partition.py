"""Identity of a user partition as the remote tier sees it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """A partition named by both topic id and topic name.

    The id is what makes remote data survive a delete-and-recreate of a topic with the same
    name: segments of the old incarnation are never mistaken for the new one's.
    """

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __post_init__(self) -> None:
        if self.partition < 0:
            raise ValueError(f"partition must be >= 0, got {self.partition}")

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.topic}-{self.partition}"
