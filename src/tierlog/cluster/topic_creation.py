"""The controller's znode writes for a new topic (Z-13), in one fenced multi-op.

Kafka writes ``/config/topics/<t>`` and ``/brokers/topics/<t>``, and its controller later
creates each partition's state znode when its watch fires. tierlog's controller writes all
of them in one transaction behind its epoch check: config, assignment, and the first state
of every partition with a live replica (``leader_election.elect_new_partition``: leader
epoch 0). A broker that sees the topic therefore always sees its states too, and a deposed
controller creates nothing. A partition without a live replica gets no state znode: it stays
new until a replica's broker registers, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kazoo.client import TransactionRequest
from kazoo.exceptions import NodeExistsError

from tierlog.cluster import paths
from tierlog.cluster.fencing import FencedWriter
from tierlog.cluster.leader_election import elect_new_partition
from tierlog.cluster.znodes import PartitionState, TopicAssignment, TopicConfigOverrides


class TopicExistsError(RuntimeError):
    """Kafka's TOPIC_ALREADY_EXISTS: ``/brokers/topics/<t>`` (or its config) exists."""


def create_topic(
    writer: FencedWriter,
    name: str,
    topic_id: str,
    assignment: Mapping[int, Sequence[int]],
    config: Mapping[str, str],
    live: Collection[int],
) -> dict[int, PartitionState | None]:
    """Write the topic's znodes; the first state of each partition (None: no live replica)."""
    controller_epoch = writer.lease.epoch
    states = {
        p: elect_new_partition(replicas, live, controller_epoch)
        for p, replicas in sorted(assignment.items())
    }
    record = TopicAssignment(
        partitions={p: tuple(r) for p, r in assignment.items()}, topic_id=topic_id
    )

    def build(tx: TransactionRequest) -> None:
        tx.create(paths.topic_config(name), TopicConfigOverrides(config).encode())
        tx.create(paths.topic(name), record.encode())
        tx.create(paths.topic_partitions(name))
        for p, state in states.items():
            if state is not None:
                tx.create(paths.partition(name, p))
                tx.create(paths.partition_state(name, p), state.encode())

    try:
        writer.commit(build)
    except NodeExistsError:
        raise TopicExistsError(f"Topic '{name}' already exists.") from None
    return states
