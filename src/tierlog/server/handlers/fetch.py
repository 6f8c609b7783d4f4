"""Fetch: sessionless, long-polling, zero-copy.

Reading follows Kafka's ``ReplicaManager.readFromLog``: partitions are read in request order,
each limited by ``min(partition_max_bytes, bytes left in max_bytes)``; the first partition
that has data may exceed the limit by one batch (``minOneMessage``) so a consumer can always
make progress. If fewer than ``min_bytes`` are available and no partition has an error, the
request waits in the purgatory until an append to one of its partitions or ``max_wait``,
then reads again. Only this connection waits.

Fetch sessions (KIP-227) are not kept: every response carries session id 0, which tells the
client to keep sending full requests.

Remote (tiered) reads: a consumer offset in ``[log_start_offset, local_log_start_offset)`` of
a tiered partition is read by the RemoteLogManager. Every such partition of the request is
collected (its byte budget reserved at its place in request order) and all are read
concurrently with one ``read_remote`` call; a full reader queue fails only that partition,
the fetch quota or ``remote.fetch.max.wait.ms`` leave it empty without error. A follower
(``replica_id >= 0``) at such an offset gets OFFSET_MOVED_TO_TIERED_STORAGE instead.
Without tiering, a ``BrokerState.remote_reader`` hook (``read(topic, partition, offset,
max_bytes, min_one_message, upper_bound)``) is still honoured partition by partition.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tierlog.log.errors import OffsetOutOfRange
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from tierlog.server.router import RawReply
from tierlog.server.state import LEADER_EPOCH, BrokerState
from tierlog.tiered.manager import RemoteFetchRequest

_NIL = uuid.UUID(int=0)

#: Kafka's broker-side ``fetch.max.bytes`` default (55 MiB): the most one Fetch response may
#: carry whatever the request asks for. Without such a cap a request naming a partition
#: many times with ``max_bytes`` near 2**31 made the broker read (and hold) gigabytes. The
#: broker key of the same name overrides it.
FETCH_MAX_BYTES = 57_671_680


def _fetch_max_bytes(state: BrokerState) -> int:
    return int(state.config.values.get("fetch.max.bytes", FETCH_MAX_BYTES))


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


@dataclass
class _Remote:
    """A partition whose offset has left the local tier, with its budget reserved up front."""

    fp: FetchPartition
    plog: Any
    offset: int
    max_bytes: int
    min_one: bool


async def _read_all(
    state: BrokerState, plan: _Plan, max_bytes: int, read_committed: bool, follower: bool
) -> tuple[list[FetchTopic], int, bool]:
    """Read every partition once; returns (topics, record bytes, any error).

    Local partitions are read in request order. A partition whose offset is in the remote
    range gets its byte budget reserved at its place in that order (so the whole response
    stays within ``max_bytes``) and ``minOneMessage`` only if no earlier partition could
    return data; all of them are then read concurrently with one ``read_remote`` call
    (beyond Kafka's first-remote-partition-only read, KAFKA-14915).
    """
    upper = "lso" if read_committed else "hw"
    remaining = max_bytes
    min_one = True
    total = 0
    any_error = False
    topics: list[FetchTopic] = []
    read: list[tuple[FetchPartition, Any]] = []
    remote: list[_Remote] = []
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
            ft.partitions.append(fp)
            read.append((fp, plog))
            limit = max(0, min(part_max, remaining))
            try:
                data = plog.read(offset, limit, min_one, upper)
            except OffsetOutOfRange as e:
                in_remote = e.log_start_offset <= offset < e.local_log_start_offset
                if in_remote and plog.remote_enabled and follower:
                    fp.error_code = int(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE)
                    any_error = True
                elif in_remote and state.tiering is not None and plog.remote_enabled:
                    remote.append(_Remote(fp, plog, offset, limit, min_one))
                    remaining -= limit
                    min_one = False
                elif in_remote and state.remote_reader is not None and state.tiering is None:
                    data = await _legacy_remote(state, name, idx, offset, limit, min_one, upper)
                    if isinstance(data, KafkaError):
                        fp.error_code = int(data.code)
                        any_error = True
                    elif data.size:
                        _fill(fp, data.chunks, data.size, read_committed, data)
                        remaining -= data.size
                        total += data.size
                        min_one = False
                else:
                    fp.error_code = int(e.code)
                    any_error = True
            except KafkaError as e:
                fp.error_code = int(e.code)
                any_error = True
            else:
                if data is not None and data.size:
                    _fill(fp, data.chunks, data.size, read_committed, data)
                    remaining -= data.size
                    total += data.size
                    min_one = False
        topics.append(ft)
    if remote:
        got, error = await _read_remote(state, remote, read_committed)
        total += got
        any_error |= error
    # offsets may have moved during the reads (appends): report them afterwards
    for fp, plog in read:
        fp.high_watermark = plog.high_watermark
        fp.last_stable_offset = plog.last_stable_offset
        fp.log_start_offset = plog.log_start_offset
    return topics, total, any_error


def _fill(
    fp: FetchPartition, chunks: Sequence[Any], size: int, read_committed: bool, data: Any
) -> None:
    fp.records = chunks
    fp.records_size = size
    if read_committed:
        fp.aborted_transactions = list(getattr(data, "aborted_transactions", None) or [])


async def _read_remote(
    state: BrokerState, remote: list[_Remote], read_committed: bool
) -> tuple[int, bool]:
    """One concurrent read of every remote partition; returns (bytes, any error)."""
    assert state.tiering is not None
    requests = [
        RemoteFetchRequest(r.plog, r.offset, r.max_bytes, r.min_one, read_committed) for r in remote
    ]
    results = await state.tiering.rlm.read_remote(requests, sum(r.max_bytes for r in remote))
    total = 0
    any_error = False
    for r, res in zip(remote, results, strict=True):
        if res.error is not ErrorCode.NONE:
            r.fp.error_code = int(res.error)
            any_error = True
        elif res.records:
            r.fp.records = [res.records]
            r.fp.records_size = len(res.records)
            total += len(res.records)
            if read_committed:
                r.fp.aborted_transactions = [
                    (t.producer_id, t.first_offset) for t in res.aborted_transactions or []
                ]
    return total, any_error


async def _legacy_remote(
    state: BrokerState,
    topic: str,
    partition: int,
    offset: int,
    limit: int,
    min_one: bool,
    upper: str,
) -> Any:
    """The per-partition ``remote_reader`` hook, for a reader installed without tiering."""
    try:
        return await state.remote_reader.read(topic, partition, offset, limit, min_one, upper)
    except KafkaError as e:
        return e


def _is_follower(body: Any, version: int) -> bool:
    if version >= 15:
        replica_state = getattr(body, "replica_state", None)
        return replica_state is not None and int(replica_state.replica_id) >= 0
    return int(getattr(body, "replica_id", -1)) >= 0


async def handle_fetch(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    session_id = int(getattr(body, "session_id", 0))
    if session_id != 0:
        return mk(
            response_schema(ApiKey.FETCH, version),
            throttle_time=0,
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            session_id=0,
            responses=[],
        )
    max_wait_s = body.max_wait.total_seconds()
    min_bytes = int(body.min_bytes)
    max_bytes = min(int(getattr(body, "max_bytes", 0x7FFFFFFF)), _fetch_max_bytes(state))
    read_committed = int(getattr(body, "isolation_level", 0)) == 1
    follower = _is_follower(body, version)
    plan = _resolve(state, body, version)
    deadline = time.monotonic() + max_wait_s
    while True:
        topics, total, any_error = await _read_all(state, plan, max_bytes, read_committed, follower)
        remaining = deadline - time.monotonic()
        if any_error or total >= min_bytes or remaining <= 0 or state.shutting_down:
            break
        if not await state.purgatory.wait(plan.keys, remaining):
            break  # timed out; nothing was appended since the last read
    buffers, size = encode_fetch_response(version, req.header.correlation_id, topics)
    return RawReply(buffers, size)
