"""DescribeProducers (API 61): the producer state a partition leader holds.

Per partition, every producer the leader remembers: id, epoch, last sequence and timestamp,
the coordinator epoch of its last marker and the first offset of its open transaction (-1
if none). ``kafka-transactions.sh find-hanging`` and ``abort`` (KIP-664) use it, with
WriteTxnMarkers, to close a transaction whose coordinator never ends it. In cluster mode every
replica answers, the leader and its followers alike (a follower's producer state is built from
the batches it replicates), and a broker with no replica of the partition answers
NOT_LEADER_OR_FOLLOWER, as Kafka's ReplicaManager does: the tool's ``--broker-id`` may name a
follower.
"""

from __future__ import annotations

from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.handlers.fetch import no_log_error
from tierlog.server.state import BrokerState


def _replica_error(state: BrokerState, topic: str, index: int) -> ErrorCode | None:
    """None when this broker holds a replica of the partition (any role)."""
    repl = state.replication
    if repl is None or not repl.manages(topic):
        return None
    return None if repl.partition(topic, index) is not None else no_log_error(state, topic, index)


def _partition(state: BrokerState, topic: str, index: int) -> dict[str, Any]:
    plog = state.topics.get_log(topic, index)
    error = (
        no_log_error(state, topic, index) if plog is None else _replica_error(state, topic, index)
    )
    if plog is None or error is not None:
        return {
            "partition_index": index,
            "error_code": error,
            "error_message": None,
            "active_producers": [],
        }
    return {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "active_producers": [
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "last_sequence": e.last_seq,
                "last_timestamp": e.last_timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": e.current_txn_first_offset,
            }
            for e in sorted(plog.active_producers(), key=lambda e: e.producer_id)
        ],
    }


async def handle_describe_producers(state: BrokerState, req: Request) -> Any:
    topics = [
        {
            "name": t.name,
            "partitions": [_partition(state, t.name, int(i)) for i in t.partition_indexes],
        }
        for t in req.body.topics
    ]
    return mk(
        response_schema(ApiKey.DESCRIBE_PRODUCERS, req.header.api_version),
        throttle_time=0,
        topics=topics,
    )
