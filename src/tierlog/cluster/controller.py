"""The controller's partition duties that follow broker membership (spec §6.3-6.5, Z-6, Z-7).

Level-triggered: on every change of the cluster view (a broker comes or goes, a topic or a
partition state changes) and once at election, the controller compares each partition's
state with the live brokers and writes what Kafka's controller would, in one reconciliation
pass:

* a partition without a state znode whose replicas include a live broker gets its first
  state (new partition election);
* a partition whose leader is offline (or -1) gets a leader from the ISR in assignment
  order, or, if the topic allows unclean election, from any live replica (offline
  election); with no candidate, its dead replicas leave the ISR but the last member stays
  and the leader is -1 (Z-7);
* a led partition whose ISR holds offline brokers loses them from the ISR;
* a broker in a controlled shutdown (``ClusterView.shutting_down``) hands its leaderships
  to other ISR members, leaves ISRs (the last member stays) and is never elected (Z-10).

The empty parent ``partitions/<p>`` of a new state is ensured outside the fence (harmless
if a deposed controller does it); every state write bumps the leader epoch (Z-8) and is
conditional twice: on the controller epoch
(``FencedWriter``) and on the partition epoch the decision was based on. A condition that
fails means the view was stale; the write is dropped and the next view change (the one
that made it stale) runs the pass again with fresh data. A state stamped by a newer
controller epoch is never touched (Z-3). ``ControllerMovedError`` ends the controller.

The pass also carries the controller's longer duties, each resumable because its state is in
ZooKeeper:

* topics queued in ``/admin/delete_topics`` lose all their znodes (``topic_deletion``) and are
  left out of every other duty;
* a replica no longer in a partition's assignment (a cancelled reassignment) leaves its ISR,
  and leadership if it held it;
* a reassignment whose target replicas are all in the ISR is completed
  (``reassignment.complete``);
* every ``leader.imbalance.check.interval.seconds`` (the first check at most 5 s after the
  election, as Kafka schedules it), with ``auto.leader.rebalance.enable``, the partitions of
  brokers above ``leader.imbalance.per.broker.percentage`` get preferred elections
  (``rebalance``, ``leader_elections``).

One thread per elected controller runs the passes; view changes only wake it, and changes
that arrive during a pass are coalesced into one more pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from tierlog.cluster import paths, reassignment
from tierlog.cluster.cluster_view import ClusterView, PartitionInfo, ViewChange
from tierlog.cluster.fencing import ControllerMovedError, FencedWriter
from tierlog.cluster.leader_election import (
    elect_for_controlled_shutdown,
    elect_new_partition,
    elect_offline,
    remove_replica,
)
from tierlog.cluster.leader_elections import ElectionType, elect_partition
from tierlog.cluster.rebalance import imbalanced
from tierlog.cluster.topic_deletion import delete_topic, drop_request
from tierlog.cluster.znodes import NO_LEADER, PartitionState

log = logging.getLogger(__name__)

FIRST_REBALANCE_CHECK_S = 5.0
"""Kafka schedules the first imbalance check 5 s after the election."""


@dataclass(frozen=True)
class ControllerSettings:
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True


def next_state(
    info: PartitionInfo,
    live: Collection[int],
    unclean_allowed: bool,
    controller_epoch: int,
    shutting_down: Collection[int] = (),
) -> PartitionState | None:
    """What the controller writes for one partition now, or None if nothing.

    ``shutting_down``: live brokers in a controlled shutdown (Z-10, checklist 41): they
    lose leadership to another ISR member when there is one, leave ISRs (the last member
    stays), and are never elected."""
    state = info.state
    if state is None:
        return elect_new_partition(info.replicas, live, controller_epoch)
    if state.controller_epoch > controller_epoch:
        return None
    electable = [b for b in live if b not in shutting_down]
    assigned = set(info.replicas)
    if state.leader == NO_LEADER or state.leader not in live or state.leader not in assigned:
        elected = elect_offline(state, info.replicas, electable, unclean_allowed, controller_epoch)
        if elected is not None:
            return elected
    elif state.leader in shutting_down:
        moved = elect_for_controlled_shutdown(
            state, info.replicas, live, shutting_down, controller_epoch
        )
        if moved is not None:
            return moved
    shrunk = state
    for replica in (state.leader, *state.isr):
        if replica == NO_LEADER or (
            replica == state.leader and replica in live and replica in assigned
        ):
            continue
        if replica not in live or replica in shutting_down or replica not in assigned:
            shrunk = remove_replica(shrunk, replica, controller_epoch) or shrunk
    if (shrunk.leader, shrunk.isr) == (state.leader, state.isr):
        return None
    return PartitionState(
        shrunk.leader,
        state.leader_epoch + 1,
        shrunk.isr,
        controller_epoch,
        state.leader_recovery_state,
    )


class PartitionController:
    """Runs the reconciliation passes of one controller epoch until ``close`` or until the
    epoch is superseded."""

    def __init__(
        self,
        view: ClusterView,
        writer: FencedWriter,
        unclean_allowed: Callable[[str], bool] = lambda _topic: False,
        settings: ControllerSettings | None = None,
    ) -> None:
        self.view = view
        self.writer = writer
        self.unclean_allowed = unclean_allowed
        self.settings = ControllerSettings() if settings is None else settings
        self._next_rebalance = time.monotonic() + min(
            FIRST_REBALANCE_CHECK_S, self.settings.leader_imbalance_check_interval_s
        )
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.passes = 0
        self._broker_epochs: dict[int, int] = {}
        self._bounced: set[int] = set()
        self._thread = threading.Thread(
            target=self._run, name=f"controller-epoch-{writer.lease.epoch}", daemon=True
        )

    @property
    def epoch(self) -> int:
        return self.writer.lease.epoch

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._wake.set()
        self._thread.start()

    def on_view_change(self, _change: ViewChange) -> None:
        """A view listener: wakes the controller (never blocks)."""
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            rebalancing = self.settings.auto_leader_rebalance_enable
            timeout = max(self._next_rebalance - time.monotonic(), 0) if rebalancing else None
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.reconcile()
                if rebalancing and time.monotonic() >= self._next_rebalance:
                    self._next_rebalance = (
                        time.monotonic() + self.settings.leader_imbalance_check_interval_s
                    )
                    self.rebalance()
            except ControllerMovedError as e:
                log.info("%s", e)
                return
            except KazooException as e:
                log.warning("controller pass failed (retried on the next change): %r", e)
            self.passes += 1

    def reconcile(self) -> None:
        """One pass over every partition of the view.

        A broker whose epoch grew since the last pass bounced (failed and came back between
        two looks, checklist 44): this pass treats it as failed, so it leaves ISRs and
        leaderships it may no longer deserve (a crash can lose unflushed data); it is live
        again in the pass that follows. It stays treated as failed until a pass applied all
        its writes.
        """
        brokers = self.view.brokers()
        bounced = {
            b
            for b, broker in brokers.items()
            if b in self._broker_epochs and broker.broker_epoch > self._broker_epochs[b]
        }
        self._broker_epochs = {b: broker.broker_epoch for b, broker in brokers.items()}
        self._bounced |= bounced
        failing = set(self._bounced)
        live = set(brokers) - failing
        shutting_down = self.view.shutting_down() & live
        topics = self.view.topics()
        deleting = self.view.deleting_topics()
        for topic in sorted(deleting):
            self._delete(topic, topic in topics)
        complete = True
        for topic in sorted(set(topics) - deleting):
            unclean = self.unclean_allowed(topic)
            for info in self.view.partitions(topic).values():
                if self._stop.is_set():
                    return
                target = next_state(info, live, unclean, self.epoch, shutting_down)
                if target is not None:
                    complete = self._write(info, target) and complete
                elif info.adding or info.removing:
                    self._complete_reassignment(info, live - shutting_down)
        if complete and failing:
            log.info("brokers %s bounced: treated as failed once", sorted(failing))
            self._bounced -= failing
            self._wake.set()

    def _delete(self, topic: str, exists: bool) -> None:
        if not self.settings.delete_topic_enable or not exists:
            log.info("dropping the deletion request of topic %s", topic)
            drop_request(self.writer, topic)
        elif delete_topic(self.writer, topic):
            log.info("deleted topic %s", topic)

    def _complete_reassignment(self, info: PartitionInfo, live: set[int]) -> None:
        target = reassignment.completion_state(info, live, self.epoch)
        if target is None:
            return
        if reassignment.complete(self.writer, info, target):
            log.info(
                "%s-%d: reassignment completed: replicas %s, leader %d epoch %d",
                info.topic,
                info.partition,
                [r for r in info.replicas if r not in info.removing],
                target.leader,
                target.leader_epoch,
            )

    def rebalance(self) -> None:
        """Z-11: preferred elections for the brokers whose leadership is too imbalanced."""
        live = set(self.view.brokers()) - self.view.shutting_down()
        deleting = self.view.deleting_topics()
        infos = [
            info
            for topic in sorted(self.view.topics())
            for info in self.view.partitions(topic).values()
        ]
        for info in imbalanced(
            infos, live, self.settings.leader_imbalance_per_broker_percentage, deleting
        ):
            if self._stop.is_set():
                return
            result = elect_partition(self.writer, info, ElectionType.PREFERRED, live)
            log.info(
                "%s-%d: auto rebalance to preferred leader %d: %s",
                info.topic,
                info.partition,
                info.replicas[0],
                result.error.name,
            )

    def _write(self, info: PartitionInfo, target: PartitionState) -> bool:
        """Write ``target``; False when the view was stale and nothing was written."""
        path = paths.partition_state(info.topic, info.partition)
        try:
            if info.state is None:
                self.writer.zk.ensure_path(paths.partition(info.topic, info.partition))
                self.writer.create(path, target.encode())
            else:
                self.writer.set_data(path, target.encode(), version=info.partition_epoch)
        except (BadVersionError, NodeExistsError, NoNodeError):
            log.debug("stale view of %s; the next change re-runs the pass", path)
            return False
        log.info(
            "%s-%d: leader %d epoch %d isr %s",
            info.topic,
            info.partition,
            target.leader,
            target.leader_epoch,
            list(target.isr),
        )
        return True
