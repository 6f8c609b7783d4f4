"""Fetch: sessionless, long-polling, zero-copy.

Reading follows Kafka's ``ReplicaManager.readFromLog``: partitions are read in request order,
each limited by ``min(partition_max_bytes, bytes left in max_bytes)``; the first partition
that has data may exceed the limit by one batch (``minOneMessage``) so a consumer can always
make progress. If fewer than ``min_bytes`` are available and no partition has an error, the
request waits in the purgatory until an append to one of its partitions or ``max_wait``,
then reads again. Only this connection waits. A request whose remote reads returned data
answers as soon as they are done, even below ``min_bytes`` (Kafka's DelayedRemoteFetch):
waiting would only delay what the remote tier already gave, and reading again would fetch
it again. Remote reads left empty (the fetch quota, ``remote.fetch.max.wait.ms``) wait as
a local fetch does, so a consumer is not answered empty in a loop.

Fetch sessions (KIP-227) are kept by ``BrokerState.fetch_sessions`` (see
``tierlog.server.fetch_sessions``): its context says which partitions a request reads (those
it names, or its whole session's) and which of them the response carries.

Each requested partition takes one of the paths of ``FetchPath``, chosen by ``route`` before
anything is read: the local log (hot), the RemoteLogManager (tiered), the answer a follower
gets at a tiered offset, or the error its resolution found.

Remote (tiered) reads: a consumer offset in ``[log_start_offset, local_log_start_offset)`` of
a tiered partition is read by the RemoteLogManager. Every such partition of the request is
collected (its byte budget reserved at its place in request order) and all are read
concurrently with one ``read_remote`` call; a full reader queue fails only that partition,
the fetch quota or ``remote.fetch.max.wait.ms`` leave it empty without error. A follower
(``replica_id >= 0``) at such an offset gets OFFSET_MOVED_TO_TIERED_STORAGE instead.

Cluster mode (``state.replication``): only the leader answers (NOT_LEADER_OR_FOLLOWER
elsewhere), ``current_leader_epoch`` is checked against the partition's epoch, a follower
reads up to the LEO instead of the high watermark, and after the read the leader records
each follower's fetch offset (its LEO), which moves the ISR and the high watermark
(``ReplicaManager.on_follower_fetch``). A follower that sends ``last_fetched_epoch`` is
checked first: one whose log diverged from ours gets no records but ``diverging_epoch``
(truncation on fetch, KIP-595), and its fetch offset is not recorded.

Client quotas (KIP-219), as Kafka's ``handleFetchRequest``: a consumer's ``max_bytes`` is
capped by what its ``consumer_byte_rate`` allows in one window; once read, the bytes it
would get count against that rate, and a consumer over it gets an empty answer carrying the
throttle time (the bytes taken back, its session untouched), its connection then muted.
Followers (``replica_id >= 0``) are never throttled by client quotas.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tierlog.log import PartitionLog
from tierlog.protocol.codec import Request
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from tierlog.server.connection import ConnectionInfo
from tierlog.server.fetch_sessions import ContextKind, FetchContext
from tierlog.server.quotas.entities import QuotaKind
from tierlog.server.router import RawReply
from tierlog.server.state import LEADER_EPOCH, BrokerState
from tierlog.tiered.manager import RemoteFetchRequest

_NIL = uuid.UUID(int=0)


def partition_error(
    state: BrokerState, topic: str, index: int, current_leader_epoch: int
) -> ErrorCode | None:
    """Why this broker may not answer for the partition as its leader: the leader epoch
    check of KIP-320, and in cluster mode NOT_LEADER_OR_FOLLOWER off the leader."""
    repl = state.replication
    if repl is None or not repl.manages(topic):
        return check_leader_epoch(current_leader_epoch)
    return repl.leader_for(topic, index, current_leader_epoch)[1]


def no_log_error(state: BrokerState, topic: str, index: int) -> ErrorCode:
    """Why a partition has no log here, as Kafka's ``getPartitionOrError`` answers: one the
    cluster knows but this broker hosts no replica of (cluster brokers keep logs only for
    their replicas) is NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata and goes
    to a replica; anything else is UNKNOWN_TOPIC_OR_PARTITION."""
    repl = state.replication
    view = None if repl is None else repl.view
    if repl is None or view is None or not repl.manages(topic):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if view.partition(topic, index) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


def check_leader_epoch(current_leader_epoch: int) -> ErrorCode | None:
    if current_leader_epoch in (-1, LEADER_EPOCH):
        return None
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One requested partition, resolved once per request: its log, or why there is none."""

    index: int
    log: PartitionLog | None
    error: ErrorCode | None
    offset: int
    max_bytes: int
    last_fetched_epoch: int = -1
    """A follower's (v12+): the epoch of its last fetched batch, -1 for none or a consumer."""
    current_leader_epoch: int = -1


class FetchPath(enum.Enum):
    """Where one partition of a Fetch is answered from."""

    HOT = "hot"
    """The local log: it returns the data, or its own range check answers
    OFFSET_OUT_OF_RANGE."""
    TIERED = "tiered"
    """A consumer at an offset only remote storage holds: the RemoteLogManager reads it."""
    FOLLOWER_TIERED = "follower-tiered"
    """A follower at an offset only remote storage holds: OFFSET_MOVED_TO_TIERED_STORAGE
    tells it to rebuild its state from remote storage (KIP-405)."""
    ERROR = "error"
    """Resolving the partition failed (unknown topic or partition, leader epoch)."""


def route(part: PartitionFetch, *, follower: bool, tiered_reads: bool) -> FetchPath:
    """The one decision of which path answers ``part``.

    ``follower``: the request comes from a replica. ``tiered_reads``: this broker has a
    RemoteLogManager to read remote offsets with (tiered storage is on).
    """
    plog = part.log
    if part.error is not None or plog is None:
        return FetchPath.ERROR
    if plog.remote_enabled and plog.is_remote_offset(part.offset):
        if follower:
            return FetchPath.FOLLOWER_TIERED
        if tiered_reads:
            return FetchPath.TIERED
    return FetchPath.HOT


@dataclass(slots=True)
class _Plan:
    """The request resolved once: each topic with its partitions, and the purgatory keys."""

    topics: list[tuple[str, uuid.UUID, list[PartitionFetch]]]
    keys: list[tuple[str, int]]


def _resolve(state: BrokerState, topics: Sequence[Any], version: int) -> _Plan:
    plan = _Plan([], [])
    for t in topics:
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
        parts: list[PartitionFetch] = []
        for p in t.partitions:
            idx = int(p.partition)
            err: ErrorCode | None = None
            plog = None
            epoch = int(getattr(p, "current_leader_epoch", -1))
            if info is None:
                err = missing
            else:
                plog = state.topics.get_log(name, idx)
                if plog is None:
                    err = no_log_error(state, name, idx)
                else:
                    err = partition_error(state, name, idx, epoch)
                    plan.keys.append((name, idx))
            parts.append(
                PartitionFetch(
                    idx,
                    plog,
                    err,
                    int(p.fetch_offset),
                    int(p.partition_max_bytes),
                    int(getattr(p, "last_fetched_epoch", -1)),
                    epoch,
                )
            )
        plan.topics.append((name, tid, parts))
    return plan


@dataclass
class _Remote:
    """A partition whose offset has left the local tier, with its budget reserved up front."""

    fp: FetchPartition
    plog: PartitionLog
    offset: int
    max_bytes: int
    min_one: bool


@dataclass
class _ReadPass:
    """One pass over the request: the response so far and what is left to read remotely."""

    max_bytes: int
    read_committed: bool
    follower: bool
    tiered_reads: bool
    remaining: int = 0
    min_one: bool = True
    total: int = 0
    any_error: bool = False

    def __post_init__(self) -> None:
        self.remaining = self.max_bytes

    def partition(
        self, part: PartitionFetch, remote: list[_Remote], *, throttled: bool = False
    ) -> tuple[FetchPartition, PartitionLog | None]:
        """Answer ``part`` along its route; a tiered one is only queued on ``remote``; a
        ``throttled`` one (the leader replication throttle) gets no records this time."""
        path = route(part, follower=self.follower, tiered_reads=self.tiered_reads)
        plog = part.log
        if path is FetchPath.ERROR or plog is None:
            self.any_error = True
            code = part.error or ErrorCode.UNKNOWN_SERVER_ERROR
            return FetchPartition(part.index, int(code)), None
        fp = FetchPartition(
            part.index,
            0,
            plog.high_watermark,
            plog.last_stable_offset,
            plog.log_start_offset,
            [] if self.read_committed else None,
        )
        limit = max(0, min(part.max_bytes, self.remaining))
        if path is FetchPath.FOLLOWER_TIERED:
            fp.error_code = int(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE)
            self.any_error = True
        elif path is FetchPath.TIERED:
            remote.append(_Remote(fp, plog, part.offset, limit, self.min_one))
            self.remaining -= limit
            self.min_one = False
        elif not throttled:
            self._read_hot(fp, plog, part.offset, limit)
        return fp, plog

    def diverged(
        self, part: PartitionFetch, plog: PartitionLog, answer: tuple[int, int] | ErrorCode
    ) -> FetchPartition:
        """A follower whose log diverged from ours (L-8.4): no records, and either the
        ``(epoch, end offset)`` it truncates to or OFFSET_OUT_OF_RANGE. Either is answered at
        once, as Kafka's ``hasDivergingEpoch`` does, never held for ``min_bytes``."""
        self.any_error = True
        fp = FetchPartition(
            part.index, 0, plog.high_watermark, plog.last_stable_offset, plog.log_start_offset
        )
        if isinstance(answer, ErrorCode):
            fp.error_code = int(answer)
        else:
            fp.diverging_epoch = answer
        return fp

    def _read_hot(self, fp: FetchPartition, plog: PartitionLog, offset: int, limit: int) -> None:
        upper: Literal["hw", "lso", "leo"] = "lso" if self.read_committed else "hw"
        if self.follower and plog.replicated:
            upper = "leo"
        try:
            data = plog.read(offset, limit, self.min_one, upper, zero_copy=True)
        except KafkaError as e:
            fp.error_code = int(e.code)
            self.any_error = True
            return
        if data.size:
            fp.records = data.chunks
            fp.records_size = data.size
            if self.read_committed:
                fp.aborted_transactions = [
                    (t.producer_id, t.first_offset) for t in plog.aborted_txns_in(offset, data)
                ]
            self.remaining -= data.size
            self.total += data.size
            self.min_one = False


async def _read_all(
    state: BrokerState,
    plan: _Plan,
    max_bytes: int,
    read_committed: bool,
    follower: bool,
    throttled: Callable[[str, int], bool] | None = None,
) -> tuple[list[FetchTopic], int, bool, bool]:
    """Read every partition once; returns (topics, record bytes, any error, remote data read).

    Local partitions are read in request order. A partition whose offset is in the remote
    range gets its byte budget reserved at its place in that order (so the whole response
    stays within ``max_bytes``) and ``minOneMessage`` only if no earlier partition could
    return data; all of them are then read concurrently with one ``read_remote`` call
    (beyond Kafka's first-remote-partition-only read, KAFKA-14915).
    """
    reading = _ReadPass(max_bytes, read_committed, follower, state.tiering is not None)
    topics: list[FetchTopic] = []
    read: list[tuple[FetchPartition, PartitionLog]] = []
    remote: list[_Remote] = []
    for name, tid, parts in plan.topics:
        ft = FetchTopic(name, tid)
        for part in parts:
            divergence = _divergence(state, name, part) if follower else None
            if divergence is not None and part.log is not None:
                ft.partitions.append(reading.diverged(part, part.log, divergence))
                continue
            fp, plog = reading.partition(
                part, remote, throttled=throttled is not None and throttled(name, part.index)
            )
            ft.partitions.append(fp)
            if plog is not None:
                read.append((fp, plog))
        topics.append(ft)
    remote_data = False
    if remote:
        got, error = await _read_remote(state, remote, read_committed)
        reading.total += got
        reading.any_error |= error
        remote_data = got > 0
    # offsets may have moved during the reads (appends): report them afterwards
    for fp, plog in read:
        fp.high_watermark = plog.high_watermark
        fp.last_stable_offset = plog.last_stable_offset
        fp.log_start_offset = plog.log_start_offset
    return topics, reading.total, reading.any_error, remote_data


async def _await_new_epochs(state: BrokerState, plan: _Plan) -> bool:
    """A follower that read its new leader's state before the leader did fetches with an
    epoch the leader does not know yet: wait for it (``wait_for_leader_epoch``, as
    OffsetForLeaderEpoch does) rather than answer UNKNOWN_LEADER_EPOCH, which costs the
    follower ``replica.fetch.backoff.ms`` and every acks=all produce that long. True if
    any partition waited (the plan is resolved again)."""
    repl = state.replication
    if repl is None:
        return False
    waited = False
    for name, _, parts in plan.topics:
        for part in parts:
            if part.error == ErrorCode.UNKNOWN_LEADER_EPOCH:
                await repl.wait_for_leader_epoch(name, part.index, part.current_leader_epoch)
                waited = True
    return waited


def _divergence(
    state: BrokerState, topic: str, part: PartitionFetch
) -> tuple[int, int] | ErrorCode | None:
    """Whether a follower may read on at its fetch offset (None), checked before its read as
    Kafka checks ``lastFetchedEpoch`` (``validateFetchOffsetAndMaybeGetDivergingEpoch``)."""
    repl = state.replication
    if repl is None or part.last_fetched_epoch < 0 or part.error is not None:
        return None
    p = repl.partition(topic, part.index)
    return None if p is None else p.diverging_epoch(part.last_fetched_epoch, part.offset)


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


def _replica_id(body: Any, version: int) -> int:
    if version >= 15:
        replica_state = getattr(body, "replica_state", None)
        return -1 if replica_state is None else int(replica_state.replica_id)
    return int(getattr(body, "replica_id", -1))


def _leader_leos(state: BrokerState, plan: _Plan) -> dict[tuple[str, int], int]:
    """Cluster mode, follower fetch: each led partition's LEO before the read (L-12)."""
    if state.replication is None:
        return {}
    return {
        (name, part.index): part.log.log_end_offset
        for name, _, parts in plan.topics
        for part in parts
        if part.log is not None and part.error is None
    }


def _record_follower_fetch(
    state: BrokerState,
    plan: _Plan,
    topics: list[FetchTopic],
    replica_id: int,
    leos: dict[tuple[str, int], int],
) -> None:
    """L-9: the leader learns the follower's LEO from each successful read, the first one
    before the request waits in the purgatory, so an acks=all produce completes as soon as
    the follower asks for the offsets after it."""
    repl = state.replication
    if repl is None:
        return
    for (name, _, parts), ft in zip(plan.topics, topics, strict=True):
        for part, fp in zip(parts, ft.partitions, strict=True):
            leo = leos.get((name, part.index))
            if leo is not None and fp.error_code == 0 and fp.diverging_epoch is None:
                repl.on_follower_fetch(name, part.index, replica_id, part.offset, leo)


def _record_throttled_bytes(state: BrokerState, topics: list[FetchTopic]) -> None:
    """The leader quota counts every byte sent for its throttled partitions, to in-sync
    followers too (Kafka's ``sizeOfThrottledPartitions``), so catch-up shares the rate with
    the steady replication of those partitions."""
    repl = state.replication
    if repl is None:
        return
    quota = repl.quotas.leader
    sent = sum(
        fp.records_size
        for ft in topics
        for fp in ft.partitions
        if fp.records_size and quota.is_throttled(ft.name, fp.partition_index)
    )
    if sent:
        quota.record(sent)


def _session_context(state: BrokerState, body: Any, version: int, follower: bool) -> FetchContext:
    """The request's fetch session context (requests before v7 carry none: sessionless)."""

    def names(t: Any) -> tuple[str, uuid.UUID]:
        return ("", t.topic_id) if version >= 13 else (t.topic, _NIL)

    return state.fetch_sessions.new_context(
        int(getattr(body, "session_id", 0)),
        int(getattr(body, "session_epoch", -1)),
        body.topics,
        getattr(body, "forgotten_topics_data", ()),
        privileged=follower,
        uses_topic_ids=version >= 13,
        names=names,
        changes=state.purgatory.changes,
    )


def _quota_max_bytes(state: BrokerState, conn: ConnectionInfo, max_bytes: int) -> int:
    """A consumer with a ``consumer_byte_rate`` asks for at most what its quota allows in
    one window (Kafka's ``getMaxValueInQuotaWindow``), so one answer cannot take it far over."""
    window = state.quotas.max_in_window(QuotaKind.FETCH, conn.principal, conn.client_id)
    return max_bytes if window is None else min(max_bytes, window)


def _throttle(state: BrokerState, conn: ConnectionInfo, size: int) -> int:
    """KIP-219 for a consumer's Fetch, once it has read: charge the bytes it would return to
    its ``consumer_byte_rate`` and its loop time to its ``request_percentage``. Over
    either, the bytes are taken back (it returns nothing) and the connection is muted for
    the larger throttle time."""
    quotas = state.quotas
    fetch_on = quotas.enabled(QuotaKind.FETCH)
    timer = conn.timer
    if not fetch_on and timer is None:
        return 0
    now_ms = time.monotonic() * 1000
    principal, client_id = conn.principal, conn.client_id
    request = 0
    if timer is not None:
        conn.request_charged = True
        request = quotas.record(
            QuotaKind.REQUEST, principal, client_id, timer.elapsed() * 100, now_ms
        )
    bandwidth = (
        quotas.record(QuotaKind.FETCH, principal, client_id, size, now_ms) if fetch_on else 0
    )
    throttle = max(bandwidth, request)
    if throttle <= 0:
        return 0
    if fetch_on:
        quotas.unrecord(QuotaKind.FETCH, principal, client_id, size, now_ms)
    quotas.throttled(QuotaKind.FETCH if bandwidth > request else QuotaKind.REQUEST, throttle)
    conn.throttle(throttle)
    return throttle


async def handle_fetch(state: BrokerState, req: Request, conn: ConnectionInfo) -> Any:
    body = req.body
    version = req.header.api_version
    replica_id = _replica_id(body, version)
    follower = replica_id >= 0
    conn.quota_exempt = follower
    ctx = _session_context(state, body, version, follower)
    if ctx.kind is ContextKind.ERROR:
        buffers, size = encode_fetch_response(
            version, req.header.correlation_id, [], error_code=int(ctx.error)
        )
        return RawReply(buffers, size)
    max_wait_s = body.max_wait.total_seconds()
    min_bytes = int(body.min_bytes)
    max_bytes = min(int(getattr(body, "max_bytes", 0x7FFFFFFF)), state.config.fetch_max_bytes)
    if not follower:
        max_bytes = _quota_max_bytes(state, conn, max_bytes)
        min_bytes = min(min_bytes, max_bytes)
    read_committed = int(getattr(body, "isolation_level", 0)) == 1
    deadline = time.monotonic() + max_wait_s
    plan = _resolve(state, ctx.topics, version)
    if follower and await _await_new_epochs(state, plan):
        plan = _resolve(state, ctx.topics, version)
    repl = state.replication
    throttled = None
    if follower and repl is not None:

        def throttled(topic: str, index: int) -> bool:
            assert repl is not None
            return repl.should_leader_throttle(topic, index, replica_id)

    while True:
        leos = _leader_leos(state, plan) if follower else {}
        topics, total, any_error, remote_data = await _read_all(
            state, plan, max_bytes, read_committed, follower, throttled
        )
        if follower:
            _record_follower_fetch(state, plan, topics, replica_id, leos)
            _record_throttled_bytes(state, topics)
        remaining = deadline - time.monotonic()
        if any_error or remote_data or total >= min_bytes or remaining <= 0 or state.shutting_down:
            break
        keys = plan.keys if ctx.wait_keys is None else ctx.wait_keys
        if not await state.purgatory.wait(keys, remaining):
            break  # timed out; nothing was appended since the last read
        if ctx.reread():
            plan = _resolve(state, ctx.topics, version)
    throttle_ms = 0 if follower else _throttle(state, conn, total)
    if throttle_ms > 0:
        session_id, error = ctx.throttled()
        buffers, size = encode_fetch_response(
            version,
            req.header.correlation_id,
            [],
            throttle_time_ms=throttle_ms,
            error_code=int(error),
            session_id=session_id,
        )
        return RawReply(buffers, size)
    topics, session_id, error = ctx.respond(topics)
    buffers, size = encode_fetch_response(
        version,
        req.header.correlation_id,
        topics,
        error_code=int(error),
        session_id=session_id,
    )
    return RawReply(buffers, size)
