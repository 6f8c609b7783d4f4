"""OffsetForLeaderEpoch (API 23, KIP-101/KIP-279): the end offset of a leader epoch, from
the epoch cache (``LeaderEpochCache.end_offset_for``, spec §4.3).

A follower asks it with its latest epoch to find where its log and the leader's diverge;
consumers ask it to validate their position after a leader change. Only the leader answers,
with the leader epoch check of KIP-320 on ``current_leader_epoch``. A follower asking with an
epoch newer than this broker's has read a state this broker is about to apply: its question
waits for it (``ReplicaManager.wait_for_leader_epoch``) before UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.handlers.fetch import no_log_error, partition_error
from tierlog.server.state import BrokerState


def _answer(index: int, code: int, epoch: int = -1, end_offset: int = -1) -> dict[str, Any]:
    return {"error_code": code, "partition": index, "leader_epoch": epoch, "end_offset": end_offset}


async def handle_offset_for_leader_epoch(state: BrokerState, req: Request) -> Any:
    topics: list[dict[str, Any]] = []
    replica_id = int(getattr(req.body, "replica_id", -1))
    for t in req.body.topics:
        parts: list[dict[str, Any]] = []
        for p in t.partitions:
            idx = int(p.partition)
            plog = state.topics.get_log(t.topic, idx)
            if plog is None:
                parts.append(_answer(idx, no_log_error(state, t.topic, idx)))
                continue
            current = int(p.current_leader_epoch)
            error = partition_error(state, t.topic, idx, current)
            repl = state.replication
            if error == ErrorCode.UNKNOWN_LEADER_EPOCH and repl is not None and replica_id >= 0:
                await repl.wait_for_leader_epoch(t.topic, idx, current)
                error = partition_error(state, t.topic, idx, current)
            if error is not None:
                parts.append(_answer(idx, error))
                continue
            epoch, end = plog.leader_epoch_cache.end_offset_for(
                int(p.leader_epoch), plog.log_end_offset
            )
            parts.append(_answer(idx, 0, epoch, end))
        topics.append({"topic": t.topic, "partitions": parts})
    return mk(
        response_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, req.header.api_version),
        throttle_time=0,
        topics=topics,
    )
