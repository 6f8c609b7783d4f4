"""Produce: append each partition's record batches through the log, then wake fetchers.

The log validates and assigns offsets; this handler only routes, maps errors and builds the
response. acks=0 gets no response at all; if such a request fails, the connection is closed,
which is the only way Kafka has to tell a fire-and-forget producer that something is wrong.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.router import CLOSE, NO_REPLY
from tierlog.server.state import LEADER_EPOCH, BrokerState

log = logging.getLogger(__name__)


def _append_time(ms: int) -> datetime.datetime | None:
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


async def handle_produce(state: BrokerState, req: Request) -> Any:
    body = req.body
    acks = int(body.acks)
    responses: list[dict[str, Any]] = []
    failed = False
    for topic_data in body.topic_data:
        name = topic_data.name
        parts: list[dict[str, Any]] = []
        for pd in topic_data.partition_data:
            index = int(pd.index)
            if acks not in (-1, 0, 1):
                parts.append(_error(index, ErrorCode.INVALID_REQUIRED_ACKS))
                failed = True
                continue
            if body.transactional_id is not None:
                parts.append(_error(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                failed = True
                continue
            plog = state.topics.get_log(name, index)
            if plog is None:
                parts.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                failed = True
                continue
            if not pd.records:
                parts.append(_error(index, ErrorCode.CORRUPT_MESSAGE, "empty record set"))
                failed = True
                continue
            try:
                # kio already copied the records into a bytes subclass: no second copy
                result = plog.append_as_leader(pd.records, LEADER_EPOCH, acks, single_batch=True)
            except KafkaError as e:
                parts.append(_error(index, e.code, e.message))
                failed = True
                continue
            except Exception as e:
                # As Kafka's appendToLocalLog: an unexpected failure is this partition's
                # error, never a response the client cannot parse.
                log.exception("produce to %s-%d failed", name, index)
                parts.append(_error(index, ErrorCode.UNKNOWN_SERVER_ERROR, str(e)))
                failed = True
                continue
            state.purgatory.notify((name, index))
            parts.append(
                {
                    "index": index,
                    "error_code": 0,
                    "base_offset": result.base_offset,
                    "log_append_time": _append_time(result.log_append_time_ms),
                    "log_start_offset": result.log_start_offset,
                    "record_errors": [],
                    "error_message": None,
                }
            )
        responses.append({"name": name, "partition_responses": parts})
    if acks == 0:
        return CLOSE if failed else NO_REPLY
    return mk(
        response_schema(ApiKey.PRODUCE, req.header.api_version),
        responses=responses,
        throttle_time=0,
    )
