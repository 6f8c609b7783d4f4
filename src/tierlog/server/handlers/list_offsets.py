"""ListOffsets: special timestamps and timestamp lookups (spec §7.4).

-1 LATEST, -2 EARLIEST, -3 MAX_TIMESTAMP (v7+), -4 EARLIEST_LOCAL (v8+) and -5
LATEST_TIERED (v9+) come straight from the log's offsets; -4 and -5 carry the leader epoch
of the offset they return (Kafka's ``epochForOffset``). A real timestamp is looked up in the
local segments; on a tiered partition the RemoteLogManager does the lookup on its reader pool
(remote indexes only when the data has left the local tier), so the loop never blocks.

The partitions of a request are resolved concurrently. From v10 the request's ``TimeoutMs``
(KIP-1075) is the one deadline of all its remote lookups: a partition whose lookup is not
done by then answers REQUEST_TIMED_OUT, the others their offsets. Before v10 the deadline is
``remote.list.offsets.request.timeout.ms``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.handlers.fetch import no_log_error, partition_error
from tierlog.server.state import LEADER_EPOCH, BrokerState
from tierlog.tiered.manager import earliest_local_offset, latest_tiered_offset

log = logging.getLogger(__name__)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def _result(idx: int, code: int, ts: int = -1, offset: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "partition_index": idx,
        "error_code": code,
        "timestamp": ts,
        "offset": offset,
        "leader_epoch": epoch,
    }


async def lookup(
    state: BrokerState,
    plog: Any,
    topic: str,
    idx: int,
    ts: int,
    version: int,
    committed: bool,
    timeout_ms: int | None = None,
) -> dict[str, Any]:
    leader_epoch = LEADER_EPOCH
    replica = state.replication.partition(topic, idx) if state.replication is not None else None
    if replica is not None:
        leader_epoch = replica.leader_epoch
    need = _MIN_VERSION.get(ts)
    if need is not None and version < need:
        return _result(idx, ErrorCode.UNSUPPORTED_VERSION)
    special = _special_offset(plog, idx, ts, committed, leader_epoch, replica)
    if special is not None:
        return special
    if ts == MAX_TIMESTAMP:
        found = plog.offset_for_max_timestamp()
    elif ts >= 0:
        if state.tiering is not None and plog.remote_enabled:
            found = await state.tiering.rlm.offset_for_timestamp(plog, ts, timeout_ms)
        else:
            found = plog.offset_for_timestamp(ts)
    else:
        return _result(idx, ErrorCode.INVALID_REQUEST)
    if found is None:
        return _result(idx, 0)
    offset, timestamp, epoch = found
    limit = plog.last_stable_offset if committed else plog.high_watermark
    if offset >= limit:
        return _result(idx, 0)
    return _result(idx, 0, timestamp, offset, epoch if epoch is not None else -1)


def _special_offset(
    plog: Any, idx: int, ts: int, committed: bool, leader_epoch: int, replica: Any
) -> dict[str, Any] | None:
    """The answer for the sentinel timestamps that need no search (latest, earliest, earliest
    local, latest tiered); None for a timestamp to look up."""
    if ts == LATEST:
        if replica is not None and plog.high_watermark < replica.epoch_start_offset:
            # KIP-207: a new leader's HW may still be below offsets a consumer already saw
            return _result(idx, ErrorCode.OFFSET_NOT_AVAILABLE)
        off = plog.last_stable_offset if committed else plog.high_watermark
        return _result(idx, 0, -1, off, leader_epoch)
    if ts == EARLIEST:
        return _result(idx, 0, -1, plog.log_start_offset, leader_epoch)
    if ts == EARLIEST_LOCAL:
        if not plog.remote_enabled:
            return _result(idx, 0, -1, plog.log_start_offset, leader_epoch)
        off, epoch = earliest_local_offset(plog)
        return _result(idx, 0, -1, off, -1 if epoch is None else epoch)
    if ts == LATEST_TIERED:
        off, epoch = latest_tiered_offset(plog)
        return _result(idx, 0, -1, off, -1 if epoch is None else epoch)
    return None


async def _partition(
    state: BrokerState,
    name: str,
    p: Any,
    version: int,
    committed: bool,
    deadline: float | None,
) -> dict[str, Any]:
    idx = int(p.partition_index)
    plog = state.topics.get_log(name, idx)
    if plog is None:
        return _result(idx, no_log_error(state, name, idx))
    epoch_error = partition_error(state, name, idx, int(getattr(p, "current_leader_epoch", -1)))
    if epoch_error is not None:
        return _result(idx, epoch_error)
    timeout_ms = None
    if deadline is not None:
        timeout_ms = max(1, int((deadline - time.monotonic()) * 1000))
    try:
        return await lookup(
            state, plog, name, idx, int(p.timestamp), version, committed, timeout_ms
        )
    except KafkaError as e:
        return _result(idx, e.code)
    except Exception:
        # e.g. a timestamp search over a segment that retention closed meanwhile:
        # this partition's error (the client retries), not a failed request
        log.exception("ListOffsets for %s-%d failed", name, idx)
        return _result(idx, ErrorCode.UNKNOWN_SERVER_ERROR)


async def handle_list_offsets(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    committed = int(getattr(body, "isolation_level", 0)) == 1
    deadline = None
    if version >= 10 and body.timeout.total_seconds() > 0:
        deadline = time.monotonic() + body.timeout.total_seconds()
    resolved = await asyncio.gather(
        *(
            _partition(state, t.name, p, version, committed, deadline)
            for t in body.topics
            for p in t.partitions
        )
    )
    topics: list[dict[str, Any]] = []
    at = 0
    for t in body.topics:
        n = len(t.partitions)
        topics.append({"name": t.name, "partitions": list(resolved[at : at + n])})
        at += n
    return mk(response_schema(ApiKey.LIST_OFFSETS, version), throttle_time=0, topics=topics)
