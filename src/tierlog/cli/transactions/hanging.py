"""``find-hanging``: Kafka's search for transactions no coordinator will ever end.

1. The partitions searched: the one named, or those of ``--topic`` (every topic, internal
   ones included, without it) that have a replica on ``--broker-id`` when it is given.
2. Candidates: every producer whose transaction is open on one of them (DescribeProducers)
   and whose last write is older than ``--max-transaction-timeout`` minutes; a transaction
   cannot legitimately stay open longer than its timeout, and no timeout exceeds the max.
3. Each candidate's producer id is looked up in every coordinator's listing
   (ListTransactions filtered by producer id), and its transactional id described
   (DescribeTransactions). The open transaction hangs when no coordinator knows the producer,
   the id is unknown, or its coordinator does not list the partition among those it still
   has to write a marker to (an ongoing transaction lists all it wrote to; a PrepareCommit
   or PrepareAbort one those still waiting for their marker).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tierlog.cli.common import print_table
from tierlog.cli.coordinators import error_name
from tierlog.cli.leaders import TopicPartition
from tierlog.cli.transactions.admin import (
    Description,
    ProducerState,
    TxnAdmin,
    TxnCommandError,
)
from tierlog.cli.transactions.commands import now_ms
from tierlog.protocol.errors import ErrorCode

HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    tp: TopicPartition
    producer: ProducerState


def _partitions(admin: TxnAdmin, a: argparse.Namespace) -> list[TopicPartition]:
    if a.topic is not None and a.partition is not None:
        return [(a.topic, a.partition)]
    replicas = admin.replicas(None if a.topic is None else [a.topic])
    return sorted(
        tp for tp, nodes in replicas.items() if a.broker_id is None or a.broker_id in nodes
    )


def _candidates(
    admin: TxnAdmin, partitions: list[TopicPartition], broker_id: int | None, max_ms: int
) -> list[OpenTransaction]:
    """Open transactions older than ``max_ms``, as the named broker (each partition's
    leader without one) describes them: a follower answers from the producer state it
    replicated, as in Kafka."""
    answers = admin.producers(partitions, broker_id)
    failed = sorted(tp for tp, (code, _) in answers.items() if code != 0)
    if failed:
        code = answers[failed[0]][0]
        where = "" if broker_id is None else f" on broker {broker_id}"
        raise TxnCommandError(
            f"Failed to describe producers for {len(partitions)} partitions{where}: "
            f"{error_name(code)} ({failed[0][0]}-{failed[0][1]})"
        )
    now = now_ms()
    return [
        OpenTransaction(tp, p)
        for tp in sorted(answers)
        for p in answers[tp][1]
        if p.txn_start_offset is not None and now - p.last_timestamp > max_ms
    ]


def hanging(admin: TxnAdmin, candidates: list[OpenTransaction]) -> list[OpenTransaction]:
    """The candidates no coordinator will end (step 3)."""
    if not candidates:
        return []
    pids = {c.producer.producer_id for c in candidates}
    tids = {
        t.producer_id: t.transactional_id
        for t in admin.list_transactions(producer_ids=pids)
        if t.producer_id in pids
    }
    descriptions: dict[str, Description | None] = {}
    for tid in sorted(set(tids.values())):
        d = admin.describe(tid)
        if isinstance(d, Description):
            descriptions[tid] = d
        elif d == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            descriptions[tid] = None
        else:
            raise TxnCommandError(f"Failed to describe {len(tids)} transactions: {error_name(d)}")
    out = []
    for c in candidates:
        known = tids.get(c.producer.producer_id)
        description = None if known is None else descriptions[known]
        if description is None or c.tp not in description.partitions:
            out.append(c)
    return out


def find_hanging(admin: TxnAdmin, a: argparse.Namespace) -> None:
    max_ms = a.max_transaction_timeout * MINUTE_MS
    found = hanging(admin, _candidates(admin, _partitions(admin, a), a.broker_id, max_ms))
    now = now_ms()
    rows = [
        [
            t.tp[0],
            str(t.tp[1]),
            str(t.producer.producer_id),
            str(t.producer.producer_epoch),
            str(-1 if t.producer.coordinator_epoch is None else t.producer.coordinator_epoch),
            str(t.producer.txn_start_offset),
            str(t.producer.last_timestamp),
            str((now - t.producer.last_timestamp) // MINUTE_MS),
        ]
        for t in found
    ]
    print_table(HEADERS, rows)
