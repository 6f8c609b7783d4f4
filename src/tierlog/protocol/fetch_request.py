"""Request bodies that more than one wire client builds: kept in the sans-IO layer so that
the broker's own clients (the replicated metadata topic) and the blocking client share them."""

from __future__ import annotations

from typing import Any

__all__ = ["fetch_fields"]


def fetch_fields(
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int,
    *,
    isolation_level: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
) -> dict[str, Any]:
    """The fields of a sessionless Fetch (v12 and on) of one partition from ``offset``, as a
    client other than a follower sends it: no leader epoch known, no session, no rack."""
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
