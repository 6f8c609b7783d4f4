"""Transaction coordinator APIs: InitProducerId (with a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions; and TxnOffsetCommit, which
the group coordinator answers.

The coordinator (``tierlog.server.txn.coordinator``) speaks plain values; version differences
live here. Old request versions cannot say PRODUCER_FENCED: InitProducerId below v4 and
AddPartitionsToTxn/AddOffsetsToTxn/EndTxn below v2 get INVALID_PRODUCER_EPOCH instead, as
Kafka sends them. A broker that has no coordinator yet (still starting) answers
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import datetime
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group import model as gm
from tierlog.server.handlers.groups import commit_partitions, commit_results
from tierlog.server.state import BrokerState
from tierlog.server.txn.coordinator import TxnCoordinator

#: The first version of each API that can carry PRODUCER_FENCED.
_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}


def for_version(req: Request, code: ErrorCode) -> ErrorCode:
    """``code`` as this request's version can say it."""
    since = _FENCED_SINCE.get(ApiKey(req.header.api_key))
    if code is ErrorCode.PRODUCER_FENCED and since is not None and req.header.api_version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _resp(req: Request, **kw: Any) -> Any:
    return mk(response_schema(req.header.api_key, req.header.api_version), throttle_time=0, **kw)


def _coordinator(state: BrokerState) -> TxnCoordinator | ErrorCode:
    if state.txn is None:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return state.txn


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


async def init_producer_id(state: BrokerState, req: Request) -> Any:
    """InitProducerId with a transactional id (the null id is ``cluster.py``'s)."""
    body = req.body
    coordinator = _coordinator(state)
    if isinstance(coordinator, ErrorCode):
        return _resp(req, error_code=coordinator, producer_id=-1, producer_epoch=-1)
    result = await coordinator.init_producer_id(
        body.transactional_id,
        _ms(body.transaction_timeout),
        int(getattr(body, "producer_id", -1)),
        int(getattr(body, "producer_epoch", -1)),
    )
    return _resp(
        req,
        error_code=for_version(req, result.error),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


def _topic_results(
    req: Request, topics: Any, errors: dict[gm.TopicPartition, ErrorCode]
) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "results_by_partition": [
                {
                    "partition_index": p,
                    "partition_error_code": for_version(
                        req, errors[gm.TopicPartition(t.name, int(p))]
                    ),
                }
                for p in t.partitions
            ],
        }
        for t in topics
    ]


def _check_topics(
    state: BrokerState, topics: Any
) -> tuple[list[gm.TopicPartition], dict[gm.TopicPartition, ErrorCode]]:
    """The requested partitions; and, if any is unknown, every partition's error (unknown
    ones UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED)."""
    wanted = [gm.TopicPartition(t.name, int(p)) for t in topics for p in t.partitions]
    unknown = {tp for tp in wanted if not _exists(state, tp)}
    if not unknown:
        return wanted, {}
    return wanted, {
        tp: (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
        )
        for tp in wanted
    }


def _exists(state: BrokerState, tp: gm.TopicPartition) -> bool:
    """Kafka asks its metadata cache: in cluster mode the view, which knows partitions this
    broker hosts no replica of."""
    repl = state.replication
    view = None if repl is None else repl.view
    if view is not None and repl is not None and repl.manages(tp.topic):
        return view.partition(tp.topic, tp.partition) is not None
    info = state.topics.get(tp.topic)
    return info is not None and 0 <= tp.partition < info.partitions


async def add_partitions_to_txn(state: BrokerState, req: Request) -> Any:
    body = req.body
    coordinator = _coordinator(state)
    if req.header.api_version >= 4:
        return await _verify_batches(state, req, coordinator)
    topics = body.v3_and_below_topics
    wanted, errors = _check_topics(state, topics)
    if not errors:
        if isinstance(coordinator, ErrorCode):
            code = coordinator
        else:
            code = await coordinator.add_partitions(
                body.v3_and_below_transactional_id,
                int(body.v3_and_below_producer_id),
                int(body.v3_and_below_producer_epoch),
                wanted,
            )
        errors = dict.fromkeys(wanted, code)
    return _resp(req, results_by_topic_v3_and_below=_topic_results(req, topics, errors))


async def _verify_batches(
    state: BrokerState, req: Request, coordinator: TxnCoordinator | ErrorCode
) -> Any:
    """AddPartitionsToTxn v4+ from a partition leader (KIP-890). Only VerifyOnly is served: an
    add on behalf of a Produce (transaction version 2) is refused as INVALID_TXN_STATE."""
    results = []
    for txn in req.body.transactions:
        wanted = [gm.TopicPartition(t.name, int(p)) for t in txn.topics for p in t.partitions]
        verdict: ErrorCode | dict[gm.TopicPartition, ErrorCode]
        if isinstance(coordinator, ErrorCode):
            verdict = coordinator
        elif not txn.verify_only:
            verdict = ErrorCode.INVALID_TXN_STATE
        else:
            verdict = coordinator.verify(
                txn.transactional_id, int(txn.producer_id), int(txn.producer_epoch), wanted
            )
        errors = dict.fromkeys(wanted, verdict) if isinstance(verdict, ErrorCode) else verdict
        results.append(
            {
                "transactional_id": txn.transactional_id,
                "topic_results": _topic_results(req, txn.topics, errors),
            }
        )
    return _resp(req, error_code=ErrorCode.NONE, results_by_transaction=results)


async def add_offsets_to_txn(state: BrokerState, req: Request) -> Any:
    body = req.body
    coordinator = _coordinator(state)
    if isinstance(coordinator, ErrorCode):
        return _resp(req, error_code=coordinator)
    code = await coordinator.add_offsets(
        body.transactional_id, int(body.producer_id), int(body.producer_epoch), body.group_id
    )
    return _resp(req, error_code=for_version(req, code))


async def end_txn(state: BrokerState, req: Request) -> Any:
    body = req.body
    coordinator = _coordinator(state)
    if isinstance(coordinator, ErrorCode):
        return _resp(req, error_code=coordinator)
    code = await coordinator.end_txn(
        body.transactional_id, int(body.producer_id), int(body.producer_epoch), body.committed
    )
    return _resp(req, error_code=for_version(req, code))


def _start_time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def describe_transactions(state: BrokerState, req: Request) -> Any:
    coordinator = _coordinator(state)
    out = []
    for tid in req.body.transactional_ids:
        if isinstance(coordinator, ErrorCode):
            out.append({"error_code": coordinator, "transactional_id": tid})
            continue
        d = coordinator.describe(tid)
        if d.error is not ErrorCode.NONE:
            # only the error, every other field at its schema default, as Kafka answers
            out.append({"error_code": d.error, "transactional_id": tid})
            continue
        topics: dict[str, list[int]] = {}
        for tp in d.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        out.append(
            {
                "error_code": ErrorCode.NONE,
                "transactional_id": tid,
                "transaction_state": d.state,
                "transaction_timeout": d.timeout_ms,
                "transaction_start_time": _start_time(d.start_ms),
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in sorted(topics.items())],
            }
        )
    return _resp(req, transaction_states=out)


async def list_transactions(state: BrokerState, req: Request) -> Any:
    body = req.body
    coordinator = _coordinator(state)
    if isinstance(coordinator, ErrorCode):
        return _resp(req, error_code=coordinator)
    code, listed, unknown = coordinator.list_transactions(
        states=list(body.state_filters or ()),
        producer_ids=[int(p) for p in body.producer_id_filters or ()],
        min_duration_ms=int(getattr(body, "duration_filter", -1)),
    )
    return _resp(
        req,
        error_code=code,
        unknown_state_filters=unknown,
        transaction_states=[
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in listed
        ],
    )


async def txn_offset_commit(state: BrokerState, req: Request) -> Any:
    """TxnOffsetCommit: the group coordinator writes the offsets into the producer's
    transaction; they count once the COMMIT marker reaches the group's partition."""
    body = req.body
    parts = commit_partitions(body.topics)
    result = await state.groups.commit_offsets(
        gm.OffsetCommitRequest(
            group_id=body.group_id,
            generation_id=int(getattr(body, "generation_id", -1)),
            member_id=getattr(body, "member_id", ""),
            group_instance_id=getattr(body, "group_instance_id", None),
            partitions=parts,
        ),
        producer=(int(body.producer_id), int(body.producer_epoch)),
    )
    return _resp(req, topics=commit_results(result))
