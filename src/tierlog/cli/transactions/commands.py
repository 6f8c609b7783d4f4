"""``list``, ``describe``, ``describe-producers`` and ``abort``: Kafka 3.7's columns and
messages, one table each, printed as ``ToolsUtils.prettyPrintTable`` prints them."""

from __future__ import annotations

import argparse
import time

from tierlog.cli.common import print_table
from tierlog.cli.coordinators import error_name
from tierlog.cli.transactions.admin import Description, TxnAdmin, TxnCommandError, tp_name
from tierlog.protocol.errors import ErrorCode

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCER_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def list_transactions(admin: TxnAdmin, a: argparse.Namespace) -> None:
    rows = [
        [t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state]
        for t in admin.list_transactions(a.state or (), a.producer_id or ())
    ]
    print_table(LIST_HEADERS, rows)


def describe(admin: TxnAdmin, a: argparse.Namespace) -> None:
    tid = a.transactional_id
    d = admin.describe(tid)
    if not isinstance(d, Description):
        raise TxnCommandError(
            f"Failed to describe transaction state of transactional-id `{tid}`: {error_name(d)}"
        )
    start = "None" if d.start_ms is None else str(d.start_ms)
    duration = "None" if d.start_ms is None else str(now_ms() - d.start_ms)
    row = [
        str(d.coordinator_id),
        tid,
        str(d.producer_id),
        str(d.producer_epoch),
        d.state,
        str(d.timeout_ms),
        start,
        duration,
        ",".join(tp_name(tp) for tp in d.partitions),
    ]
    print_table(DESCRIBE_HEADERS, [row])


def describe_producers(admin: TxnAdmin, a: argparse.Namespace) -> None:
    tp = (a.topic, a.partition)
    code, producers = admin.producers([tp], a.broker_id).get(
        tp, (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), [])
    )
    if code != 0:
        where = "leader" if a.broker_id is None else f"broker {a.broker_id}"
        raise TxnCommandError(
            f"Failed to describe producers for partition {tp_name(tp)} on {where}: "
            f"{error_name(code)}"
        )
    rows = [
        [
            str(p.producer_id),
            str(p.producer_epoch),
            str(-1 if p.coordinator_epoch is None else p.coordinator_epoch),
            str(p.last_sequence),
            str(p.last_timestamp),
            "None" if p.txn_start_offset is None else str(p.txn_start_offset),
        ]
        for p in producers
    ]
    print_table(PRODUCER_HEADERS, rows)


def abort(admin: TxnAdmin, a: argparse.Namespace) -> None:
    """By start offset (the producer whose open transaction starts there, from the leader's
    DescribeProducers) or by the explicit producer id, epoch and coordinator epoch; a
    coordinator epoch below 0 becomes 0, as Kafka's tool sends it (no marker was ever
    written for that producer, and 0 is at most any coordinator's epoch)."""
    tp = (a.topic, a.partition)
    if a.start_offset is None:
        spec = (a.producer_id, a.producer_epoch, max(a.coordinator_epoch, 0))
    else:
        code, producers = admin.producers([tp]).get(
            tp, (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), [])
        )
        if code != 0:
            raise TxnCommandError(
                f"Failed to validate producer state for partition {tp_name(tp)}: {error_name(code)}"
            )
        found = next((p for p in producers if p.txn_start_offset == a.start_offset), None)
        if found is None:
            raise TxnCommandError(
                f"Could not find any open transactions starting at offset {a.start_offset} "
                f"on partition {tp_name(tp)}"
            )
        spec = (found.producer_id, found.producer_epoch, found.coordinator_epoch or 0)
    code = admin.abort(tp, *spec)
    if code != 0:
        pid, epoch, coordinator_epoch = spec
        raise TxnCommandError(
            f"Failed to abort transaction AbortTransactionSpec(topicPartition={tp_name(tp)}, "
            f"producerId={pid}, producerEpoch={epoch}, coordinatorEpoch={coordinator_epoch}): "
            f"{error_name(code)}"
        )
