"""Elections the controller runs on request: ElectLeaders (API 43) and the automatic
preferred-leader rebalance (spec/kafka-replication.md Z-11, Z-12; Kafka's
``KafkaController.onReplicaElection``).

* **Preferred** elects ``A[0]`` (the first replica of the assignment) if it is live, not
  shutting down and in the ISR; the ISR is unchanged. Already led by ``A[0]``:
  ELECTION_NOT_NEEDED; otherwise impossible: PREFERRED_LEADER_NOT_AVAILABLE.
* **Unclean** acts only on partitions without a live leader: the first live replica in the
  ISR, else the first live replica of the assignment alone in the ISR and RECOVERING
  (KIP-704), whatever ``unclean.leader.election.enable`` says (the operator asked). A live
  leader: ELECTION_NOT_NEEDED; no live replica: ELIGIBLE_LEADERS_NOT_AVAILABLE.

An unknown partition answers UNKNOWN_TOPIC_OR_PARTITION and a topic queued for deletion
INVALID_TOPIC_EXCEPTION. Each election bumps the leader epoch and is one write, fenced by the
controller epoch and conditional on the partition epoch it was decided on; when a newer state
won, the partition is decided again from a fresh read (``ATTEMPTS`` times; after that the
strategy's own error is reported). The functions block (ZooKeeper): the server runs them off
its event loop.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import IntEnum

from kazoo.exceptions import BadVersionError, NoNodeError

from tierlog.cluster import paths
from tierlog.cluster.cluster_view import ClusterView, PartitionInfo
from tierlog.cluster.fencing import FencedWriter
from tierlog.cluster.leader_election import elect_offline, elect_preferred
from tierlog.cluster.znodes import NO_LEADER, PartitionState, ZnodeFormatError
from tierlog.protocol.errors import ErrorCode

ATTEMPTS = 3
"""Fresh reads of a partition whose state moved between the decision and the write."""


class ElectionType(IntEnum):
    """``election_type`` of ElectLeaders (Kafka's ``ElectionType``)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class ElectionResult:
    error: ErrorCode
    message: str | None = None
    leader_epoch: int = -1
    """The leader epoch written (-1 when nothing was): the caller waits for its view to
    show it, as Kafka answers once its metadata cache has the new leader."""


def _decide(
    info: PartitionInfo,
    election: ElectionType,
    live: Collection[int],
    controller_epoch: int,
) -> PartitionState | ElectionResult:
    state = info.state
    if election == ElectionType.PREFERRED:
        if state is not None and info.replicas and state.leader == info.replicas[0]:
            return ElectionResult(ErrorCode.ELECTION_NOT_NEEDED)
        target = (
            None if state is None else elect_preferred(state, info.replicas, live, controller_epoch)
        )
        if target is None:
            return ElectionResult(
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Failed to elect leader for partition {info.topic}-{info.partition} under "
                "strategy PreferredReplicaPartitionLeaderElectionStrategy",
            )
        return target
    if state is not None and state.leader != NO_LEADER and state.leader in live:
        return ElectionResult(ErrorCode.ELECTION_NOT_NEEDED)
    target = (
        None if state is None else elect_offline(state, info.replicas, live, True, controller_epoch)
    )
    if target is None:
        return ElectionResult(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"Failed to elect leader for partition {info.topic}-{info.partition} under "
            "strategy OfflinePartitionLeaderElectionStrategy(true)",
        )
    return target


def _fresh(writer: FencedWriter, info: PartitionInfo) -> PartitionInfo | None:
    """``info`` with its state and partition epoch read from ZooKeeper now."""
    try:
        data, stat = writer.zk.get(paths.partition_state(info.topic, info.partition))
        state = PartitionState.decode(data)
    except (NoNodeError, ZnodeFormatError):
        return None
    return PartitionInfo(
        info.topic,
        info.partition,
        info.replicas,
        info.adding,
        info.removing,
        state,
        int(stat.version),
    )


def elect_partition(
    writer: FencedWriter,
    info: PartitionInfo,
    election: ElectionType,
    live: Collection[int],
) -> ElectionResult:
    """Run one election and write it; ``ControllerMovedError`` propagates."""
    current: PartitionInfo | None = info
    for _ in range(ATTEMPTS):
        if current is None or (
            current.state is not None and current.state.controller_epoch > writer.lease.epoch
        ):
            break
        decided = _decide(current, election, live, writer.lease.epoch)
        if isinstance(decided, ElectionResult):
            return decided
        path = paths.partition_state(current.topic, current.partition)
        try:
            writer.set_data(path, decided.encode(), version=current.partition_epoch)
        except (BadVersionError, NoNodeError):
            current = _fresh(writer, current)
            continue
        return ElectionResult(ErrorCode.NONE, None, decided.leader_epoch)
    code = (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if election == ElectionType.PREFERRED
        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
    return ElectionResult(code, "the partition state kept changing; retry")


def elect_leaders(
    view: ClusterView,
    writer: FencedWriter,
    election: ElectionType,
    partitions: Iterable[tuple[str, int]] | None,
) -> dict[tuple[str, int], ElectionResult]:
    """ElectLeaders on the controller: one result per requested partition (None: every
    partition of the cluster)."""
    deleting = view.deleting_topics()
    if partitions is None:
        partitions = [
            (t, p) for t in sorted(view.topics()) if t not in deleting for p in view.partitions(t)
        ]
    live = set(view.brokers()) - view.shutting_down()
    results: dict[tuple[str, int], ElectionResult] = {}
    for topic, index in partitions:
        info = view.partition(topic, index)
        if info is None:
            results[(topic, index)] = ElectionResult(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"The partition {topic}-{index} does not exist.",
            )
        elif topic in deleting:
            results[(topic, index)] = ElectionResult(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Deletion of topic {topic} is in progress."
            )
        else:
            results[(topic, index)] = elect_partition(writer, info, election, live)
    return results
