"""DeleteRecords: advance the log start offset (offset -1 means "up to the high watermark").

In cluster mode only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere); followers learn
nothing of it yet (Kafka's low watermark over replicas is not kept)."""

from __future__ import annotations

from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.handlers.fetch import no_log_error, partition_error
from tierlog.server.state import BrokerState


async def handle_delete_records(state: BrokerState, req: Request) -> Any:
    topics: list[dict[str, Any]] = []
    for t in req.body.topics:
        parts: list[dict[str, Any]] = []
        for p in t.partitions:
            idx = int(p.partition_index)
            plog = state.topics.get_log(t.name, idx)
            if plog is None:
                parts.append(
                    {
                        "partition_index": idx,
                        "low_watermark": -1,
                        "error_code": no_log_error(state, t.name, idx),
                    }
                )
                continue
            not_leader = partition_error(state, t.name, idx, -1)
            if not_leader is not None:
                parts.append(
                    {"partition_index": idx, "low_watermark": -1, "error_code": not_leader}
                )
                continue
            offset = int(p.offset)
            if offset == -1:
                offset = plog.high_watermark
            try:
                if offset < 0 or offset > plog.high_watermark:
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
                plog.delete_records(offset)
                parts.append(
                    {
                        "partition_index": idx,
                        "low_watermark": plog.log_start_offset,
                        "error_code": 0,
                    }
                )
            except KafkaError as e:
                parts.append({"partition_index": idx, "low_watermark": -1, "error_code": e.code})
        topics.append({"name": t.name, "partitions": parts})
    return mk(
        response_schema(ApiKey.DELETE_RECORDS, req.header.api_version),
        throttle_time=0,
        topics=topics,
    )
