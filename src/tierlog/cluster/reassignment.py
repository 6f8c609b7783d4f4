"""Partition reassignment (KIP-455; spec/kafka-replication.md §6.9, Z-16..Z-19).

The reassignment lives in the topic znode, as Kafka 2.4+ keeps it: for a partition being
moved from the original replicas ORS to the target TRS, ``partitions[p]`` holds the full
replica set RS = TRS followed by the ORS members not in TRS, ``adding_replicas[p]`` = TRS - ORS
and ``removing_replicas[p]`` = ORS - TRS. Being in the znode makes it survive a controller
failover: the next controller finds it and goes on.

* **Start** (``alter_reassignments``, AlterPartitionReassignments on the controller): the
  topic znode is rewritten once per topic, fenced and conditional on its version. Brokers
  read the replica set from the topic znode (they watch it), so the adding replicas start
  following at once and the leader tracks them; Kafka bumps the leader epoch here only to
  push LeaderAndIsr, which tierlog does not need. They join the ISR by the leader's usual
  rule (L-15).
* **Completion** (``complete``, in the controller's pass): once TRS is inside the ISR, one
  fenced multi-op writes the partition state (a leader from TRS if the old one is not in it,
  ISR restricted to TRS, leader epoch + 1) and the topic znode (RS = TRS, no adding or
  removing), both conditional on the versions read. Removed replicas stop following when
  they see the topic znode.
* **Cancel** (null target) returns to ORS: RS = ORS, nothing adding or removing; the
  controller's pass then drops the cancelled replicas from the ISR (``controller.next_state``).
  Replacing a reassignment in flight starts from the same ORS.

Errors as Kafka: an empty, duplicated or negative replica list, or adding a broker that is not
live, INVALID_REPLICA_ASSIGNMENT; an unknown partition or a topic being deleted,
UNKNOWN_TOPIC_OR_PARTITION; cancelling where nothing runs, NO_REASSIGNMENT_IN_PROGRESS.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kazoo.client import TransactionRequest
from kazoo.exceptions import BadVersionError, NoNodeError

from tierlog.cluster import paths
from tierlog.cluster.cluster_view import ClusterView, PartitionInfo
from tierlog.cluster.fencing import FencedWriter
from tierlog.cluster.znodes import NO_LEADER, PartitionState, TopicAssignment
from tierlog.protocol.errors import ErrorCode

ATTEMPTS = 5
"""Rewrites of a topic znode that changed between its read and the write."""


@dataclass(frozen=True)
class Reassignment:
    """One partition's replica sets while it moves."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas after it."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> Reassignment:
        """Kafka's ``ReplicaAssignment.reassignTo``: from ORS to ``target``."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return Reassignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in origin if r not in target),
        )


@dataclass(frozen=True)
class ReassignmentResult:
    error: ErrorCode
    message: str | None = None
    written: Reassignment | None = None
    """The replica sets now in the topic znode (the caller waits for its view to show them,
    so that a ListPartitionReassignments that follows sees the reassignment)."""


def _validate(target: Sequence[int], current: Reassignment, live: Collection[int]) -> str | None:
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {list(target)}"
    dead = [r for r in target if r not in current.replicas and r not in live]
    if dead:
        return f"Replica assignment has brokers that are not alive. Replica list: {list(target)}"
    return None


def alter_reassignments(
    view: ClusterView,
    writer: FencedWriter,
    requests: Mapping[str, Mapping[int, Sequence[int] | None]],
) -> dict[tuple[str, int], ReassignmentResult]:
    """AlterPartitionReassignments on the controller: start, replace or cancel (None)."""
    results: dict[tuple[str, int], ReassignmentResult] = {}
    live = set(view.brokers())
    deleting = view.deleting_topics()
    for topic, wanted in requests.items():
        if topic in deleting:
            for p in wanted:
                results[(topic, p)] = ReassignmentResult(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} is being deleted."
                )
            continue
        results.update(_alter_topic(writer, topic, wanted, live))
    return results


def _alter_topic(
    writer: FencedWriter,
    topic: str,
    wanted: Mapping[int, Sequence[int] | None],
    live: Collection[int],
) -> dict[tuple[str, int], ReassignmentResult]:
    for _ in range(ATTEMPTS):
        results: dict[tuple[str, int], ReassignmentResult] = {}
        try:
            data, stat = writer.zk.get(paths.topic(topic))
        except NoNodeError:
            return {
                (topic, p): ReassignmentResult(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist."
                )
                for p in wanted
            }
        record = TopicAssignment.decode(data)
        partitions = dict(record.partitions)
        adding, removing = dict(record.adding), dict(record.removing)
        changed = False
        for p, target in wanted.items():
            key = (topic, p)
            if p not in partitions:
                results[key] = ReassignmentResult(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {topic}-{p} does not exist."
                )
                continue
            current = Reassignment(partitions[p], adding.get(p, ()), removing.get(p, ()))
            if target is None:
                if not current.in_progress:
                    results[key] = ReassignmentResult(
                        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                        f"Partition {topic}-{p} is not being reassigned.",
                    )
                    continue
                moved = Reassignment(current.origin)
            else:
                problem = _validate(target, current, live)
                if problem is not None:
                    results[key] = ReassignmentResult(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
                    continue
                moved = current.reassign_to(target)
            partitions[p] = moved.replicas
            adding.pop(p, None)
            removing.pop(p, None)
            if moved.adding:
                adding[p] = moved.adding
            if moved.removing:
                removing[p] = moved.removing
            changed = True
            results[key] = ReassignmentResult(ErrorCode.NONE, written=moved)
        if not changed:
            return results
        updated = TopicAssignment(partitions, record.topic_id, adding, removing)
        try:
            writer.set_data(paths.topic(topic), updated.encode(), version=int(stat.version))
        except BadVersionError:
            continue
        return results
    return {
        (topic, p): ReassignmentResult(ErrorCode.REQUEST_TIMED_OUT, "the topic kept changing")
        for p in wanted
    }


def ongoing(
    view: ClusterView, wanted: Mapping[str, Collection[int]] | None
) -> dict[str, list[PartitionInfo]]:
    """ListPartitionReassignments: the partitions moving, by topic (None: all)."""
    out: dict[str, list[PartitionInfo]] = {}
    for info in view.reassigning():
        if wanted is not None and info.partition not in wanted.get(info.topic, ()):
            continue
        out.setdefault(info.topic, []).append(info)
    for infos in out.values():
        infos.sort(key=lambda i: i.partition)
    return out


def completion_state(
    info: PartitionInfo, live: Collection[int], controller_epoch: int
) -> PartitionState | None:
    """Z-18: the state that completes ``info``'s reassignment, or None while TRS is not yet
    in the ISR (or no target replica can lead)."""
    state = info.state
    moving = Reassignment(info.replicas, info.adding, info.removing)
    if state is None or not moving.in_progress or state.controller_epoch > controller_epoch:
        return None
    target = moving.target
    if not all(r in state.isr for r in target):
        return None
    leader = state.leader
    if leader not in target or leader not in live:
        leader = next((r for r in target if r in live and r in state.isr), NO_LEADER)
    if leader == NO_LEADER:
        return None
    return PartitionState(
        leader,
        state.leader_epoch + 1,
        tuple(r for r in state.isr if r in target),
        controller_epoch,
        state.leader_recovery_state,
    )


def complete(writer: FencedWriter, info: PartitionInfo, state: PartitionState) -> bool:
    """Write the completion of ``info``'s reassignment with ``state`` in one fenced
    multi-op; False when the topic or the partition state moved meanwhile."""
    path = paths.topic(info.topic)
    try:
        data, stat = writer.zk.get(path)
    except NoNodeError:
        return False
    record = TopicAssignment.decode(data)
    moving = Reassignment(
        record.partitions.get(info.partition, ()),
        record.adding.get(info.partition, ()),
        record.removing.get(info.partition, ()),
    )
    if moving != Reassignment(info.replicas, info.adding, info.removing):
        return False
    partitions = dict(record.partitions)
    partitions[info.partition] = moving.target
    adding = {p: r for p, r in record.adding.items() if p != info.partition}
    removing = {p: r for p, r in record.removing.items() if p != info.partition}
    updated = TopicAssignment(partitions, record.topic_id, adding, removing)

    def build(tx: TransactionRequest) -> None:
        tx.set_data(
            paths.partition_state(info.topic, info.partition),
            state.encode(),
            info.partition_epoch,
        )
        tx.set_data(path, updated.encode(), int(stat.version))

    try:
        writer.commit(build)
    except (BadVersionError, NoNodeError):
        return False
    return True
