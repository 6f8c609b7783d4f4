"""The controller's znode writes for CreatePartitions (Kafka's ``addPartitions``).

Kafka rewrites ``/brokers/topics/<t>`` with the grown assignment and its controller creates
the new partitions' state znodes when its watch fires. As for a new topic
(``cluster.topic_creation``), tierlog's controller writes the grown assignment and the first
state of every new partition with a live replica in one fenced multi-op, conditional on the
version of the assignment it read: a reassignment or another CreatePartitions written
meanwhile makes it start again from what is there now, and a deposed controller writes
nothing. A broker that sees a new partition therefore sees its state too, and one that is a
replica of it opens its log then (``replication.manager``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from kazoo.client import TransactionRequest
from kazoo.exceptions import BadVersionError, NoNodeError

from tierlog.cluster import paths
from tierlog.cluster.assignment import assign_or_refuse
from tierlog.cluster.fencing import FencedWriter
from tierlog.cluster.leader_election import elect_new_partition
from tierlog.cluster.znodes import PartitionState, TopicAssignment
from tierlog.protocol.errors import ErrorCode, KafkaError

#: Writes tried against an assignment that keeps changing underneath, before giving up.
ATTEMPTS = 5


def grown_assignment(
    record: TopicAssignment,
    topic: str,
    count: int,
    requested: Sequence[Sequence[int]] | None,
    brokers: Mapping[int, str | None],
) -> dict[int, tuple[int, ...]]:
    """The replicas of each partition to add (Kafka's checks and messages), from
    ``requested`` (one replica list per new partition) or assigned as Kafka assigns them:
    round robin over the live ``brokers`` (id to rack), rack-aware, starting at the broker
    that leads partition 0, so the new partitions continue the existing pattern."""
    current = len(record.partitions)
    if record.adding or record.removing:
        raise KafkaError(
            ErrorCode.REASSIGNMENT_IN_PROGRESS,
            f"A partition reassignment is in progress for topic {topic}.",
        )
    if count < current:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{count}.",
        )
    if count == current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    added = count - current
    rf = len(record.partitions.get(0, ()))
    if requested is not None:
        return _requested(requested, added, current, rf, brokers)
    ordered = sorted(brokers)
    first = record.partitions.get(0, (0,))[0]
    start = next((i for i, b in enumerate(ordered) if b >= first), 0)
    assigned = assign_or_refuse(brokers, added, rf, start, current)
    return {p: tuple(r) for p, r in assigned.items()}


def _requested(
    requested: Sequence[Sequence[int]],
    added: int,
    current: int,
    rf: int,
    brokers: Mapping[int, str | None],
) -> dict[int, tuple[int, ...]]:
    if len(requested) != added:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Increasing the number of partitions by {added} but {len(requested)} "
            "assignments provided.",
        )
    out = {current + i: tuple(int(b) for b in r) for i, r in enumerate(requested)}
    for p, replicas in out.items():
        if not replicas:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Partition {p} has no replicas."
            )
        if len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {p}.",
            )
    odd = {p: len(r) for p, r in out.items() if len(r) != rf}
    if odd:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
            f"partitions {sorted(odd)} have replication factors {[odd[p] for p in sorted(odd)]}, "
            "respectively.",
        )
    unknown = sorted({b for r in out.values() for b in r} - set(brokers))
    if unknown:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
        )
    return out


def _build(
    topic: str,
    updated: TopicAssignment,
    version: int,
    states: Mapping[int, PartitionState | None],
    tx: TransactionRequest,
) -> None:
    tx.set_data(paths.topic(topic), updated.encode(), version)
    for p, state in sorted(states.items()):
        if state is not None:
            tx.create(paths.partition(topic, p))
            tx.create(paths.partition_state(topic, p), state.encode())


def add_partitions(
    writer: FencedWriter,
    topic: str,
    count: int,
    requested: Sequence[Sequence[int]] | None,
    brokers: Mapping[int, str | None],
    *,
    validate_only: bool = False,
) -> dict[int, tuple[int, ...]]:
    """Grow ``topic`` to ``count`` partitions; the replicas of each partition added.
    Raises ``KafkaError`` with Kafka's code where the request is refused, and
    ``ControllerMovedError`` when this broker stopped being the controller."""
    for _ in range(ATTEMPTS):
        try:
            data, stat = writer.zk.get(paths.topic(topic))
        except NoNodeError:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist."
            ) from None
        record = TopicAssignment.decode(data)
        added = grown_assignment(record, topic, count, requested, brokers)
        if validate_only:
            return added
        states = {p: elect_new_partition(r, brokers, writer.lease.epoch) for p, r in added.items()}
        updated = TopicAssignment({**record.partitions, **added}, record.topic_id)
        try:
            writer.commit(partial(_build, topic, updated, int(stat.version), states))
        except BadVersionError:
            continue
        return added
    raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"The assignment of {topic} kept changing.")
