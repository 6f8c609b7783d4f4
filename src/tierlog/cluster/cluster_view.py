"""A broker's picture of the cluster, kept current by ZooKeeper watches (spec §6.11).

Kafka's controller pushes UpdateMetadata and LeaderAndIsr; tierlog's brokers watch instead
(docs/architecture.md, "Cluster coordination"). ``ClusterView`` holds what Metadata,
DescribeCluster and the replication owner need: live brokers with their endpoints, racks and
broker epochs (czxid), the controller, every topic's assignment, and every partition's
state with its partition epoch (the state znode's version).

What holds:

* **Apply by epoch.** Watches are one-shot and coalesce; kazoo's ``DataWatch`` re-reads the
  data and Stat and re-arms in one call. A partition state is taken only if
  ``(leader_epoch, partition_epoch)`` is higher than the one held, so the view never goes
  back (a late or replayed read is dropped), and skipped epochs are simply jumped over;
  listeners see every epoch change they must react to (a follower restarts on any).
* **Topics come and go by generation.** A deleted topic leaves the view with every
  partition; its watches stop at their next event. A topic re-created under the same name
  starts a new generation, whose partition epochs start again from zero.
* **Topic configs come with their topic.** The watch of ``/config/topics/<t>`` is armed,
  and has read the overrides, before the topic's partitions are reported, so a broker that
  creates the topic locally has them; each later write is reported as
  ``TopicConfigChanged`` with the znode's version.
* Watches survive reconnects and new sessions (kazoo re-reads after a session loss).
* All updates happen on kazoo's single callback thread; readers on other threads get
  consistent snapshots under a lock. Listeners run on that callback thread and must not
  block: the server hands each change to its event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from tierlog.cluster import paths
from tierlog.cluster.znodes import (
    BrokerRegistration,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    TopicConfigOverrides,
    ZnodeFormatError,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveBroker:
    registration: BrokerRegistration
    broker_epoch: int


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    state: PartitionState | None = None
    """None until the controller has written the partition's first state."""
    partition_epoch: int = -1


@dataclass(frozen=True)
class BrokersChanged:
    brokers: Mapping[int, LiveBroker]


@dataclass(frozen=True)
class ControllerChanged:
    controller_id: int | None


@dataclass(frozen=True)
class PartitionChanged:
    info: PartitionInfo


@dataclass(frozen=True)
class TopicDeleted:
    topic: str


@dataclass(frozen=True)
class TopicConfigChanged:
    """``/config/topics/<t>`` was written (or first read); ``ClusterView.topic_config``."""

    topic: str


@dataclass(frozen=True)
class TopicConfig:
    """A topic's overrides as ``/config/topics/<t>`` holds them; ``version`` is the znode's
    (-1: no znode), ``topic_id`` the topic's, so a re-created topic's versions are new."""

    config: Mapping[str, str]
    version: int
    topic_id: str | None


@dataclass(frozen=True)
class ShuttingDownChanged:
    """The brokers doing a controlled shutdown (``/tierlog/controlled_shutdown``)."""

    brokers: frozenset[int]


@dataclass(frozen=True)
class DeletionsChanged:
    """The topics queued for deletion (children of ``/admin/delete_topics``)."""

    topics: frozenset[str]


ViewChange = (
    BrokersChanged
    | ControllerChanged
    | PartitionChanged
    | TopicDeleted
    | TopicConfigChanged
    | ShuttingDownChanged
    | DeletionsChanged
)


@dataclass
class _Topic:
    generation: int
    assignment: TopicAssignment
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    config: TopicConfig | None = None


class ClusterView:
    def __init__(
        self, zk: KazooClient, listener: Callable[[ViewChange], None] | None = None
    ) -> None:
        self._zk = zk
        self._listeners: list[Callable[[ViewChange], None]] = [] if listener is None else [listener]
        self._lock = threading.Lock()
        self._closed = False
        self._generations = 0
        self._brokers: dict[int, LiveBroker] = {}
        self._controller_id: int | None = None
        self._topics: dict[str, _Topic] = {}
        self._watched_topics: set[str] = set()
        self._shutting_down: frozenset[int] = frozenset()
        self._deleting: frozenset[str] = frozenset()

    # ---- reading ---------------------------------------------------------------------
    @property
    def controller_id(self) -> int | None:
        with self._lock:
            return self._controller_id

    def brokers(self) -> dict[int, LiveBroker]:
        with self._lock:
            return dict(self._brokers)

    def topics(self) -> dict[str, TopicAssignment]:
        with self._lock:
            return {name: t.assignment for name, t in self._topics.items()}

    def partitions(self, topic: str) -> dict[int, PartitionInfo]:
        with self._lock:
            t = self._topics.get(topic)
            return {} if t is None else dict(t.partitions)

    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        with self._lock:
            t = self._topics.get(topic)
            return None if t is None else t.partitions.get(index)

    def topic_config(self, topic: str) -> TopicConfig | None:
        """The topic's overrides; None for a topic not in the view (or not read yet)."""
        with self._lock:
            t = self._topics.get(topic)
            return None if t is None else t.config

    def shutting_down(self) -> frozenset[int]:
        """Brokers that asked for a controlled shutdown and are still registered for it."""
        with self._lock:
            return self._shutting_down

    def deleting_topics(self) -> frozenset[str]:
        """Topics whose deletion was requested and is not finished (``/admin/delete_topics``)."""
        with self._lock:
            return self._deleting

    def reassigning(self) -> list[PartitionInfo]:
        """Partitions with a reassignment in progress (adding or removing replicas)."""
        with self._lock:
            return [
                info
                for t in self._topics.values()
                for info in t.partitions.values()
                if info.adding or info.removing
            ]

    def add_listener(self, listener: Callable[[ViewChange], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[ViewChange], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Arm the watches; the view is complete for what existed when this returns."""
        DataWatch(self._zk, paths.CONTROLLER, self._on_controller)
        ChildrenWatch(self._zk, paths.BROKER_IDS, self._on_broker_ids)
        ChildrenWatch(self._zk, paths.BROKER_TOPICS, self._on_topic_names)
        self._zk.ensure_path(paths.CONTROLLED_SHUTDOWN)
        ChildrenWatch(self._zk, paths.CONTROLLED_SHUTDOWN, self._on_shutting_down)
        self._zk.ensure_path(paths.ADMIN_DELETE_TOPICS)
        ChildrenWatch(self._zk, paths.ADMIN_DELETE_TOPICS, self._on_deletions)

    def close(self) -> None:
        """Stop applying changes; each watch ends at its next event."""
        with self._lock:
            self._closed = True

    # ---- watch callbacks (kazoo's callback thread) -----------------------------------
    def _notify(self, change: ViewChange) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(change)
            except Exception:
                log.exception("cluster view listener failed on %r", change)

    def _on_controller(self, data: bytes | None, _stat: ZnodeStat | None) -> bool:
        if self._closed:
            return False
        controller = None
        if data is not None:
            try:
                controller = ControllerRegistration.decode(data).broker_id
            except ZnodeFormatError as e:
                log.error("ignoring %s: %s", paths.CONTROLLER, e)
        with self._lock:
            changed = controller != self._controller_id
            self._controller_id = controller
        if changed:
            self._notify(ControllerChanged(controller))
        return True

    def _on_broker_ids(self, children: list[str]) -> bool:
        if self._closed:
            return False
        brokers: dict[int, LiveBroker] = {}
        for child in children:
            try:
                data, stat = self._zk.get(paths.broker(int(child)))
                brokers[int(child)] = LiveBroker(
                    BrokerRegistration.decode(int(child), data), int(stat.czxid)
                )
            except NoNodeError:
                continue
            except KazooException as e:
                if self._closed:
                    return False
                log.warning("could not read broker registration %s: %r", child, e)
                continue
            except (ValueError, ZnodeFormatError) as e:
                log.error("ignoring broker registration %s: %s", child, e)
        with self._lock:
            changed = brokers != self._brokers
            self._brokers = brokers
        if changed:
            self._notify(BrokersChanged(dict(brokers)))
        return True

    def _on_shutting_down(self, children: list[str]) -> bool:
        if self._closed:
            return False
        brokers = frozenset(int(c) for c in children if c.isdigit())
        with self._lock:
            changed = brokers != self._shutting_down
            self._shutting_down = brokers
        if changed:
            self._notify(ShuttingDownChanged(brokers))
        return True

    def _on_deletions(self, children: list[str]) -> bool:
        if self._closed:
            return False
        topics = frozenset(children)
        with self._lock:
            changed = topics != self._deleting
            self._deleting = topics
        if changed:
            self._notify(DeletionsChanged(topics))
        return True

    def _on_topic_names(self, children: list[str]) -> bool:
        if self._closed:
            return False
        for name in children:
            if name not in self._watched_topics:
                self._watched_topics.add(name)
                self._watch_topic(name)
        return True

    def _watch_topic(self, name: str) -> None:
        def on_topic(data: bytes | None, _stat: ZnodeStat | None) -> bool:
            return self._on_topic(name, data)

        DataWatch(self._zk, paths.topic(name), on_topic)

    def _on_topic(self, name: str, data: bytes | None) -> bool:
        if self._closed:
            return False
        if data is None:
            self._watched_topics.discard(name)
            self._drop_topic(name)
            return False
        try:
            assignment = TopicAssignment.decode(data)
        except ZnodeFormatError as e:
            log.error("ignoring %s: %s", paths.topic(name), e)
            return True
        with self._lock:
            topic = self._topics.get(name)
        if topic is not None and topic.assignment.topic_id != assignment.topic_id:
            self._drop_topic(name)
            topic = None
        fresh = topic is None
        if topic is None:
            self._generations += 1
            topic = _Topic(self._generations, assignment)
        new: list[int] = []
        changed: list[PartitionInfo] = []  # new partitions and changed assignments
        with self._lock:
            # published with its partitions: Metadata must never see the topic with none
            # while its config is read (librdkafka takes that for a partition count of 0)
            if fresh:
                self._topics[name] = topic
            topic.assignment = assignment
            for p, replicas in sorted(assignment.partitions.items()):
                old = topic.partitions.get(p)
                info = PartitionInfo(
                    name,
                    p,
                    replicas,
                    assignment.adding.get(p, ()),
                    assignment.removing.get(p, ()),
                    None if old is None else old.state,
                    -1 if old is None else old.partition_epoch,
                )
                topic.partitions[p] = info
                if old is None:
                    new.append(p)
                if old != info:
                    changed.append(info)
        if fresh:
            self._watch_config(name, topic.generation)
        for info in changed:
            self._notify(PartitionChanged(info))
        for p in new:
            self._watch_state(name, topic.generation, p)
        return True

    def _watch_config(self, name: str, generation: int) -> None:
        def on_config(data: bytes | None, stat: ZnodeStat | None) -> bool:
            return self._on_config(name, generation, data, stat)

        DataWatch(self._zk, paths.topic_config(name), on_config)

    def _on_config(
        self, name: str, generation: int, data: bytes | None, stat: ZnodeStat | None
    ) -> bool:
        if self._closed:
            return False
        overrides: Mapping[str, str] = {}
        if data is not None:
            try:
                overrides = TopicConfigOverrides.decode(data).config
            except ZnodeFormatError as e:
                log.error("ignoring %s: %s", paths.topic_config(name), e)
                return True
        version = -1 if stat is None else int(stat.version)
        with self._lock:
            topic = self._topics.get(name)
            if topic is None or topic.generation != generation:
                return False
            held = topic.config
            if held is not None and (data is None or held.version >= version):
                return True  # a late read, or the znode removed with its topic: keep them
            topic.config = TopicConfig(dict(overrides), version, topic.assignment.topic_id)
        self._notify(TopicConfigChanged(name))
        return True

    def _watch_state(self, name: str, generation: int, index: int) -> None:
        def on_state(data: bytes | None, stat: ZnodeStat | None) -> bool:
            return self._on_state(name, generation, index, data, stat)

        DataWatch(self._zk, paths.partition_state(name, index), on_state)

    def _drop_topic(self, name: str) -> None:
        with self._lock:
            existed = self._topics.pop(name, None) is not None
        if existed:
            self._notify(TopicDeleted(name))

    def _on_state(
        self,
        name: str,
        generation: int,
        index: int,
        data: bytes | None,
        stat: ZnodeStat | None,
    ) -> bool:
        if self._closed:
            return False
        with self._lock:
            topic = self._topics.get(name)
            if topic is None or topic.generation != generation:
                return False
        if data is None or stat is None:
            return True
        try:
            state = PartitionState.decode(data)
        except ZnodeFormatError as e:
            log.error("ignoring %s: %s", paths.partition_state(name, index), e)
            return True
        with self._lock:
            old = topic.partitions.get(index)
            if old is None:
                return True
            held = (-1, -1) if old.state is None else (old.state.leader_epoch, old.partition_epoch)
            if (state.leader_epoch, int(stat.version)) <= held:
                return True
            info = PartitionInfo(
                name, index, old.replicas, old.adding, old.removing, state, int(stat.version)
            )
            topic.partitions[index] = info
        self._notify(PartitionChanged(info))
        return True
