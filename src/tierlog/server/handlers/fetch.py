"""Fetch: sessionless, long-polling, zero-copy.

Reading follows Kafka's ``ReplicaManager.readFromLog``: partitions are read in request order,
each limited by ``min(partition_max_bytes, bytes left in max_bytes)``; the first partition
that has data may exceed the limit by one batch (``minOneMessage``) so a consumer can always
make progress. If fewer than ``min_bytes`` are available and no partition has an error, the
request waits in the purgatory until an append to one of its partitions or ``max_wait``,
then reads again. Only this connection waits.

Fetch sessions (KIP-227) are not kept: every response carries session id 0, which tells the
client to keep sending full requests.

Remote (tiered) reads hook in through ``BrokerState.remote_reader``: for an offset in
``[log_start_offset, local_log_start_offset)`` the handler awaits
``remote_reader.read(topic, partition, offset, max_bytes, min_one_message, upper_bound)``,
which must return an object with ``chunks`` and ``size`` like the local ``FetchData``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tierlog.log.errors import OffsetOutOfRange
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from tierlog.server.router import RawReply
from tierlog.server.state import LEADER_EPOCH, BrokerState

_NIL = uuid.UUID(int=0)


def check_leader_epoch(current_leader_epoch: int) -> ErrorCode | None:
    if current_leader_epoch == -1 or current_leader_epoch == LEADER_EPOCH:
        return None
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


class _Plan:
    """The request resolved once: which log each requested partition reads from."""

    __slots__ = ("entries", "keys")

    def __init__(self) -> None:
        # (topic name, topic id, [(partition, plog|None, error|None, offset, max_bytes)])
        self.entries: list[
            tuple[str, uuid.UUID, list[tuple[int, Any, ErrorCode | None, int, int]]]
        ] = []
        self.keys: list[tuple[str, int]] = []


def _resolve(state: BrokerState, body: Any, version: int) -> _Plan:
    plan = _Plan()
    for t in body.topics:
        if version >= 13:
            info = state.topics.by_id(t.topic_id)
            name = info.name if info is not None else ""
            tid = t.topic_id
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            name = t.topic
            info = state.topics.get(name)
            tid = info.topic_id if info is not None else _NIL
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        parts: list[tuple[int, Any, ErrorCode | None, int, int]] = []
        for p in t.partitions:
            idx = int(p.partition)
            err: ErrorCode | None = None
            plog = None
            if info is None:
                err = missing
            else:
                plog = state.topics.get_log(name, idx)
                if plog is None:
                    err = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    err = check_leader_epoch(int(getattr(p, "current_leader_epoch", -1)))
                    plan.keys.append((name, idx))
            parts.append((idx, plog, err, int(p.fetch_offset), int(p.partition_max_bytes)))
        plan.entries.append((name, tid, parts))
    return plan


async def _read_all(
    state: BrokerState, plan: _Plan, max_bytes: int, read_committed: bool
) -> tuple[list[FetchTopic], int, bool]:
    """Read every partition once; returns (topics, record bytes, any error)."""
    upper = "lso" if read_committed else "hw"
    remaining = max_bytes
    min_one = True
    total = 0
    any_error = False
    topics: list[FetchTopic] = []
    for name, tid, parts in plan.entries:
        ft = FetchTopic(name, tid)
        for idx, plog, err, offset, part_max in parts:
            if err is not None or plog is None:
                ft.partitions.append(
                    FetchPartition(idx, int(err or ErrorCode.UNKNOWN_SERVER_ERROR))
                )
                any_error = True
                continue
            fp = FetchPartition(
                idx,
                0,
                plog.high_watermark,
                plog.last_stable_offset,
                plog.log_start_offset,
                [] if read_committed else None,
            )
            limit = max(0, min(part_max, remaining))
            try:
                data = await _read_partition(state, name, idx, plog, offset, limit, min_one, upper)
            except KafkaError as e:
                fp.error_code = int(e.code)
                any_error = True
            else:
                if data is not None and data.size:
                    fp.records = data.chunks
                    fp.records_size = data.size
                    remaining -= data.size
                    total += data.size
                    min_one = False
                    if read_committed:
                        fp.aborted_transactions = list(
                            getattr(data, "aborted_transactions", None) or []
                        )
            # offsets may have moved during the read (appends): report them afterwards
            fp.high_watermark = plog.high_watermark
            fp.last_stable_offset = plog.last_stable_offset
            fp.log_start_offset = plog.log_start_offset
            ft.partitions.append(fp)
        topics.append(ft)
    return topics, total, any_error


async def _read_partition(
    state: BrokerState,
    topic: str,
    partition: int,
    plog: Any,
    offset: int,
    limit: int,
    min_one: bool,
    upper: str,
) -> Any:
    try:
        return plog.read(offset, limit, min_one, upper)
    except OffsetOutOfRange as e:
        reader = state.remote_reader
        if reader is not None and e.log_start_offset <= offset < e.local_log_start_offset:
            return await reader.read(topic, partition, offset, limit, min_one, upper)
        raise


async def handle_fetch(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    session_id = int(getattr(body, "session_id", 0))
    if session_id != 0:
        return mk(
            response_schema(1, version),
            throttle_time=0,
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            session_id=0,
            responses=[],
        )
    max_wait_s = body.max_wait.total_seconds()
    min_bytes = int(body.min_bytes)
    max_bytes = int(getattr(body, "max_bytes", 0x7FFFFFFF))
    read_committed = int(getattr(body, "isolation_level", 0)) == 1
    plan = _resolve(state, body, version)
    deadline = time.monotonic() + max_wait_s
    while True:
        topics, total, any_error = await _read_all(state, plan, max_bytes, read_committed)
        remaining = deadline - time.monotonic()
        if any_error or total >= min_bytes or remaining <= 0 or state.shutting_down:
            break
        if not await state.purgatory.wait(plan.keys, remaining):
            break  # timed out; nothing was appended since the last read
    buffers, size = encode_fetch_response(version, req.header.correlation_id, topics)
    return RawReply(buffers, size)
