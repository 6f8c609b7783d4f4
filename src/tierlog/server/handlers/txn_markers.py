"""WriteTxnMarkers (API 27): the transaction coordinator ends a transaction in a partition.

For each marker and each of its partitions this broker appends one control batch (COMMIT or
ABORT, with the coordinator epoch) through ``PartitionLog.append_txn_marker``, as Kafka's
partition leader does with origin COORDINATOR:

* partition unknown here: UNKNOWN_TOPIC_OR_PARTITION; in cluster mode, not led here:
  NOT_LEADER_OR_FOLLOWER (the coordinator looks the leader up again and resends), and an ISR
  below ``min.insync.replicas`` NOT_ENOUGH_REPLICAS before appending, as any acks=-1 append;
* the producer state refuses a stale producer epoch (INVALID_PRODUCER_EPOCH) and a marker
  from an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED): the coordinator stops
  sending that transaction's markers;
* the append is acknowledged with acks=-1 semantics: in cluster mode once the high watermark
  passes the marker (Kafka waits up to ``request.timeout.ms``, 30 s by default), so a
  coordinator completes a transaction only once every partition's outcome is durable in its
  ISR; in single-node mode once written (and fsynced if ``flush.messages`` asks);
* once acknowledged, the marker is handed to ``txn_marker_listener`` (the group coordinator
  completes the producer's transactional offsets). The acknowledgements run in tasks that the
  broker owns (``BrokerState.marker_writes``), so a coordinator that drops its connection
  while it waits does not leave a marker in the log that the offsets cache never applied.

The coordinator sends these requests over the wire to every partition leader, this broker
included, exactly as Kafka's marker channel does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from tierlog.log import PartitionLog
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.replication.partition import Partition
from tierlog.server.handlers.fetch import no_log_error
from tierlog.server.state import LEADER_EPOCH, BrokerState

log = logging.getLogger(__name__)

#: Kafka's default ``request.timeout.ms``: how long a marker waits for its replicas.
MARKER_REPLICATION_TIMEOUT_S = 30.0


@dataclass(slots=True)
class _Written:
    """One marker appended to one partition, still to be acknowledged."""

    topic: str
    index: int
    plog: PartitionLog
    last_offset: int
    flush_offset: int | None
    replica: Partition | None
    error: ErrorCode = ErrorCode.NONE


def _leader(state: BrokerState, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
    repl = state.replication
    if repl is None or not repl.manages(topic):
        return None, ErrorCode.NONE
    p, error = repl.leader_for(topic, index)
    if p is None:
        return None, error or ErrorCode.NOT_LEADER_OR_FOLLOWER
    return p, p.check_produce(-1) or ErrorCode.NONE


def _write_one(
    state: BrokerState,
    marker: Any,
    topic: str,
    index: int,
    strict_epoch: bool,
) -> _Written | ErrorCode:
    plog = state.topics.get_log(topic, index)
    if plog is None:
        return no_log_error(state, topic, index)
    replica, error = _leader(state, topic, index)
    if error is not ErrorCode.NONE:
        return error
    leader_epoch = LEADER_EPOCH if replica is None else replica.leader_epoch
    try:
        result = plog.append_txn_marker(
            int(marker.producer_id),
            int(marker.producer_epoch),
            int(marker.coordinator_epoch),
            committed=bool(marker.transaction_result),
            leader_epoch=leader_epoch,
            defer_flush=True,
            strict_epoch=strict_epoch,
        )
    except KafkaError as e:
        log.info("marker for producer %d on %s-%d refused: %s", marker.producer_id, topic, index, e)
        return e.code
    except Exception:
        log.exception("marker for producer %d on %s-%d failed", marker.producer_id, topic, index)
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if replica is not None and state.replication is not None:
        state.replication.after_leader_append(replica)
    return _Written(topic, index, plog, result.last_offset, result.flush_offset, replica)


async def _acknowledge(state: BrokerState, marker: Any, w: _Written) -> None:
    """Wait until the marker is durable as acks=-1 asks (fsynced if ``flush.messages`` is
    due, replicated to the ISR in cluster mode), then tell the listener."""
    if w.flush_offset is not None:
        try:
            await asyncio.wrap_future(state.logs.flush_to(w.plog, w.flush_offset))
        except Exception:
            log.exception("flushing the marker on %s-%d failed", w.topic, w.index)
            w.error = ErrorCode.KAFKA_STORAGE_ERROR
            return
    state.purgatory.notify((w.topic, w.index))
    repl = state.replication
    if repl is not None and w.replica is not None:
        w.error = await repl.wait_for_acks(
            w.replica, w.last_offset + 1, MARKER_REPLICATION_TIMEOUT_S
        )
    listener = state.txn_marker_listener
    if w.error is ErrorCode.NONE and listener is not None:
        listener.on_marker(
            w.topic,
            w.index,
            int(marker.producer_id),
            bool(marker.transaction_result),
            w.last_offset,
        )


async def _all(acks: list[Coroutine[Any, Any, None]]) -> None:
    await asyncio.gather(*acks)


async def handle_write_txn_markers(state: BrokerState, req: Request) -> Any:
    version = req.header.api_version
    strict_epoch = int(getattr(req.body, "transaction_version", 0) or 0) >= 2
    results: list[tuple[Any, list[tuple[str, list[tuple[int, _Written | ErrorCode]]]]]] = []
    for marker in req.body.markers:
        topics = [
            (
                t.name,
                [
                    (int(i), _write_one(state, marker, t.name, int(i), strict_epoch))
                    for i in t.partition_indexes
                ],
            )
            for t in marker.topics
        ]
        results.append((marker, topics))
    acks = [
        _acknowledge(state, marker, w)
        for marker, topics in results
        for _, parts in topics
        for _, w in parts
        if isinstance(w, _Written)
    ]
    if acks:
        await state.marker_writes.run(_all(acks))
    markers_out = []
    for marker, topics in results:
        topics_out = []
        for name, parts in topics:
            parts_out = []
            for index, w in parts:
                code = w.error if isinstance(w, _Written) else w
                parts_out.append({"partition_index": index, "error_code": code})
            topics_out.append({"name": name, "partitions": parts_out})
        markers_out.append({"producer_id": marker.producer_id, "topics": topics_out})
    return mk(response_schema(ApiKey.WRITE_TXN_MARKERS, version), markers=markers_out)
