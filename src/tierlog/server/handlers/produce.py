"""Produce: append each partition's record batches through the log, then wake fetchers.

The log validates and assigns offsets; this handler only routes, maps errors and builds the
response. acks=0 gets no response at all; if such a request fails, the connection is closed,
which is the only way Kafka has to tell a fire-and-forget producer that something is wrong.

An append that reaches ``flush.messages`` is fsynced on the log manager's flush pool, never on
the event loop. As in Kafka, that partition is answered (and its fetchers woken) only after
the fsync: a failed fsync answers UNKNOWN_SERVER_ERROR, as a failed append does. A fetch
that polls meanwhile does not read the batch either: as Kafka's high watermark moves only
after that flush, the log holds its high watermark at the first offset of an append whose
fsync is still running.

Transactional batches (KIP-98) are appended like idempotent ones; the log opens the
producer's transaction at the first one and refuses a non-transactional batch while it is
open. Before a producer's first transactional write to a partition (no transaction open for it
there) the partition is verified with the coordinator (KIP-890 part 1, ``state.txn_verifier``)
and a partition not in the transaction is refused with Kafka's conversion of the
coordinator's answer (``txn_partition_hooks.produce_error_for``).

Cluster mode (``state.replication``) adds Kafka's leader rules around the same append: a
partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER, acks=all with an ISR
below ``min.insync.replicas`` answers NOT_ENOUGH_REPLICAS before appending, the batch is
stamped with the partition's leader epoch, and an acks=all append is answered once the high
watermark passes it (``ReplicaManager.wait_for_acks``). A NOT_LEADER_OR_FOLLOWER answer
carries the leader this broker knows of (KIP-951, Produce v10+: ``current_leader`` per
partition and the ``node_endpoints`` of those leaders), so a client moves to the new leader
without a Metadata round trip, as after a controlled shutdown moved the leadership away.

Client quotas (KIP-219): the records are appended first, then the request's size counts
against the client's ``producer_byte_rate``; an answer over quota carries the throttle time
and the connection reads nothing more for that long.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from dataclasses import dataclass
from typing import Any

from tierlog.log import AppendResult, PartitionLog
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import RECORDS_OFFSET, read_header
from tierlog.replication.partition import Partition
from tierlog.server.connection import ConnectionInfo
from tierlog.server.handlers.cluster_metadata import brokers
from tierlog.server.handlers.fetch import no_log_error
from tierlog.server.quotas.entities import QuotaKind
from tierlog.server.router import CLOSE, NO_REPLY
from tierlog.server.state import LEADER_EPOCH, BrokerState
from tierlog.server.txn_partition_hooks import produce_error_for

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


@dataclass(slots=True)
class _Appended:
    index: int
    plog: PartitionLog
    result: AppendResult
    flush_error: BaseException | None = None
    replica: Partition | None = None
    """Cluster mode: the led partition whose high watermark acks=all waits for."""
    replicated_error: ErrorCode | None = None


def _append(
    state: BrokerState, name: str, pd: Any, acks: int, refused: dict[tuple[str, int], ErrorCode]
) -> _Appended | dict[str, Any]:
    """Append one partition's batches; the error entry of the response if that fails."""
    index = int(pd.index)
    if acks not in (-1, 0, 1):
        return _error(index, ErrorCode.INVALID_REQUIRED_ACKS)
    verification = refused.get((name, index))
    if verification is not None:
        return _error(index, verification, "partition is not part of the ongoing transaction")
    plog = state.topics.get_log(name, index)
    if plog is None:
        return _error(index, no_log_error(state, name, index))
    if not pd.records:
        return _error(index, ErrorCode.CORRUPT_MESSAGE, "empty record set")
    replica = _led_partition(state, name, index, acks)
    if isinstance(replica, ErrorCode):
        return _error(index, replica)
    leader_epoch = LEADER_EPOCH if replica is None else replica.leader_epoch
    try:
        # kio already copied the records into a bytes subclass: no second copy
        result = plog.append_as_leader(
            pd.records, leader_epoch, acks, single_batch=True, defer_flush=True
        )
    except KafkaError as e:
        return _error(index, e.code, e.message)
    except Exception as e:
        # As Kafka's appendToLocalLog: an unexpected failure is this partition's
        # error, never a response the client cannot parse.
        log.exception("produce to %s-%d failed", name, index)
        return _error(index, ErrorCode.UNKNOWN_SERVER_ERROR, str(e))
    if replica is not None and state.replication is not None:
        state.replication.after_leader_append(replica)
    return _Appended(index, plog, result, replica=replica)


def _led_partition(
    state: BrokerState, name: str, index: int, acks: int
) -> Partition | ErrorCode | None:
    """Cluster mode: the partition this broker leads, or why it may not append (L-2, L-3);
    None for the single-node path."""
    repl = state.replication
    if repl is None or not repl.manages(name):
        return None
    p, error = repl.leader_for(name, index)
    if p is None:
        return error or ErrorCode.NOT_LEADER_OR_FOLLOWER
    return p.check_produce(acks) or p


async def _wait_for_replicas(
    state: BrokerState, appended: list[_Appended], timeout_s: float
) -> None:
    """acks=all in cluster mode: wait until the HW passes each append (L-7)."""
    repl = state.replication
    waiting = [a for a in appended if a.replica is not None and a.flush_error is None]
    if repl is None or not waiting:
        return
    codes = await asyncio.gather(
        *(
            repl.wait_for_acks(a.replica, a.result.last_offset + 1, timeout_s)
            for a in waiting
            if a.replica is not None
        )
    )
    for a, code in zip(waiting, codes, strict=True):
        a.replicated_error = code


async def _flush(state: BrokerState, appended: list[_Appended]) -> None:
    """Run the fsyncs ``flush.messages`` asks for, concurrently, on the flush pool."""
    due = [(a, a.result.flush_offset) for a in appended if a.result.flush_offset is not None]
    if not due:
        return

    async def flush(plog: PartitionLog, offset: int) -> None:
        await asyncio.wrap_future(state.logs.flush_to(plog, offset))

    outcomes = await asyncio.gather(
        *(flush(a.plog, offset) for a, offset in due), return_exceptions=True
    )
    for (a, _), outcome in zip(due, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            a.flush_error = outcome


def _answer(state: BrokerState, name: str, a: _Appended) -> dict[str, Any]:
    if a.flush_error is not None:
        log.error("produce to %s-%d failed", name, a.index, exc_info=a.flush_error)
        return _error(a.index, ErrorCode.UNKNOWN_SERVER_ERROR, str(a.flush_error))
    state.purgatory.notify((name, a.index))
    if a.replicated_error not in (None, ErrorCode.NONE):
        assert a.replicated_error is not None
        return _error(a.index, a.replicated_error)
    return {
        "index": a.index,
        "error_code": 0,
        "base_offset": a.result.base_offset,
        "log_append_time": _append_time(a.result.log_append_time_ms),
        "log_start_offset": a.result.log_start_offset,
        "record_errors": [],
        "error_message": None,
    }


def _transactional_producer(records: bytes | None) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional batch; None for any other record set."""
    if not records or len(records) < RECORDS_OFFSET:
        return None
    h = read_header(records, 0)
    return (h.producer_id, h.producer_epoch) if h.is_transactional else None


async def _verify(
    state: BrokerState, transactional_id: str | None, topic_data: Any, version: int
) -> dict[tuple[str, int], ErrorCode]:
    """KIP-890: the partitions whose first transactional write the coordinator did not
    verify, with the error the producer gets."""
    if transactional_id is None:
        return {}
    unverified: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for td in topic_data:
        for pd in td.partition_data:
            producer = _transactional_producer(pd.records)
            plog = state.topics.get_log(td.name, int(pd.index))
            if producer is None or plog is None or plog.has_ongoing_txn(producer[0]):
                continue
            unverified.setdefault(producer, []).append((td.name, int(pd.index)))
    refused: dict[tuple[str, int], ErrorCode] = {}
    for (pid, epoch), partitions in unverified.items():
        answers = await state.txn_verifier.verify(transactional_id, pid, epoch, partitions)
        for tp in partitions:
            code = answers.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code is not ErrorCode.NONE:
                refused[tp] = produce_error_for(code, version)
    return refused


def _throttle(state: BrokerState, conn: ConnectionInfo, acks: int) -> int:
    """KIP-219 for Produce, after the append: charge the request's size to the client's
    ``producer_byte_rate`` and (unless acks=0, as Kafka) its loop time to its
    ``request_percentage``; the connection is muted for the larger throttle time, which the
    response carries."""
    quotas = state.quotas
    produce_on = quotas.enabled(QuotaKind.PRODUCE)
    timer = conn.timer if acks != 0 else None
    if not produce_on and timer is None:
        return 0
    now_ms = time.monotonic() * 1000
    principal, client_id = conn.principal, conn.client_id
    bandwidth = (
        quotas.record(QuotaKind.PRODUCE, principal, client_id, conn.request_size, now_ms)
        if produce_on
        else 0
    )
    request = 0
    if timer is not None:
        conn.request_charged = True
        request = quotas.record(
            QuotaKind.REQUEST, principal, client_id, timer.elapsed() * 100, now_ms
        )
    if bandwidth <= 0 and request <= 0:
        return 0
    kind = QuotaKind.PRODUCE if bandwidth > request else QuotaKind.REQUEST
    throttle = max(bandwidth, request)
    quotas.throttled(kind, throttle)
    conn.throttle(throttle)
    return throttle


async def handle_produce(state: BrokerState, req: Request, conn: ConnectionInfo) -> Any:
    body = req.body
    acks = int(body.acks)
    started = time.monotonic()
    refused = await _verify(state, body.transactional_id, body.topic_data, req.header.api_version)
    topics = [
        (
            td.name,
            [_append(state, td.name, pd, acks, refused) for pd in td.partition_data],
        )
        for td in body.topic_data
    ]
    appended = [a for _, parts in topics for a in parts if isinstance(a, _Appended)]
    await _flush(state, appended)
    if acks == -1:
        await _wait_for_replicas(state, appended, body.timeout.total_seconds())
    responses: list[dict[str, Any]] = []
    failed = False
    leaders: set[int] = set()
    for name, parts in topics:
        answers = [_answer(state, name, a) if isinstance(a, _Appended) else a for a in parts]
        failed |= any(int(a["error_code"]) != 0 for a in answers)
        if log.isEnabledFor(logging.DEBUG):
            _debug_answers(req, name, answers, started)
        for a in answers:
            leader = _point_to_leader(state, name, a)
            if leader is not None:
                leaders.add(leader)
        responses.append({"name": name, "partition_responses": answers})
    throttle_ms = _throttle(state, conn, acks)
    if acks == 0:
        return CLOSE if failed else NO_REPLY
    return mk(
        response_schema(ApiKey.PRODUCE, req.header.api_version),
        responses=responses,
        throttle_time=throttle_ms,
        node_endpoints=[b for b in brokers(state) if b["node_id"] in leaders] if leaders else [],
    )


def _debug_answers(req: Request, topic: str, answers: list[dict[str, Any]], started: float) -> None:
    """At debug: each refused partition, and each one answered after more than a second (an
    acks=-1 wait), to follow a client that stalls on a produce."""
    elapsed_ms = (time.monotonic() - started) * 1000
    for a in answers:
        code = ErrorCode(int(a["error_code"]))
        if code is not ErrorCode.NONE or elapsed_ms > 1000:
            log.debug(
                "produce from %r (correlation %d, transactional id %r) to %s-%d: %s after "
                "%.0f ms %s",
                req.header.client_id,
                req.header.correlation_id,
                req.body.transactional_id,
                topic,
                a["index"],
                code.name,
                elapsed_ms,
                a.get("error_message") or "",
            )


def _point_to_leader(state: BrokerState, name: str, answer: dict[str, Any]) -> int | None:
    """KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the current leader and its epoch;
    the leader's id, whose endpoint the response then carries, or None."""
    repl = state.replication
    if repl is None or int(answer["error_code"]) != ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return None
    current = repl.current_leader(name, int(answer["index"]))
    if current is None:
        return None
    answer["current_leader"] = {"leader_id": current[0], "leader_epoch": current[1]}
    return current[0]
