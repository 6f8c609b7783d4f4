"""The broker's replication layer in cluster mode (Kafka's ``ReplicaManager``).

``ReplicaManager`` owns every ``Partition`` this broker holds a replica of, the follower
fetchers, the acks=all waiters and the ISR writes. It runs on the event loop; handlers ask
it (never ZooKeeper) who leads, at which epoch, and whether a produce may be acknowledged.

How leadership reaches partitions: the ``ClusterView`` (ZooKeeper watches) reports every
change of a partition's state znode; its listener hands the change to the loop, where
``Partition.apply_state`` takes it by epoch (spec §6.11, pitfalls 1-2). A new leader epoch
makes this broker leader (the epoch is cached at the LEO, follower states reset) or a
follower (the partition is re-added to the fetcher of its leader, which truncates it by
OffsetForLeaderEpoch before fetching). Topics appear locally when the view first shows them:
the manager creates the local topic (its id and config overrides from ZooKeeper).

ISR changes are the leader's (Kafka's ZK-direct mode, L-18): a conditional ``setData`` of
the state znode on the partition epoch the leader holds, keeping the leader epoch; a failed
condition means the state moved on, and the view brings the new one.

Leadership listeners (``add_leadership_listener``) are the seam through which the
coordinators that live on an internal topic (the group coordinator on
``__consumer_offsets``, and the transaction coordinator on ``__transaction_state`` in the
same way) follow leadership of that topic's partitions; see ``LeadershipListener``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tierlog.cluster.broker_writes import (
    ZooKeeperError,
    announce_controlled_shutdown,
    claim_producer_ids,
    read_topic_config,
    shared_cluster_id,
    topic_config,
    write_partition_state,
    write_topic_config,
)
from tierlog.cluster.cluster_view import (
    BrokersChanged,
    ClusterView,
    PartitionChanged,
    PartitionInfo,
    TopicConfig,
    TopicConfigChanged,
    TopicDeleted,
    ViewChange,
)
from tierlog.cluster.producer_id_blocks import ProducerIdBlock
from tierlog.cluster.znodes import NO_LEADER
from tierlog.config.broker import BrokerConfig
from tierlog.log import PartitionLog
from tierlog.log.checkpoint import topic_id_from_base64
from tierlog.log.names import TopicPartition
from tierlog.log.partition_log import INTERNAL_TOPICS
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.replication.aux_state import RemoteAuxStateSource
from tierlog.replication.delayed_produce import DelayedProduces
from tierlog.replication.fetcher import FetcherSettings, ReplicaFetcher
from tierlog.replication.partition import Partition
from tierlog.replication.quota import ReplicationQuota, ReplicationQuotas
from tierlog.replication.topic_configs import TopicConfigSync

if TYPE_CHECKING:
    from tierlog.cluster.node import ClusterNode
    from tierlog.log import LogManager

log = logging.getLogger(__name__)

Key = tuple[str, int]

#: Replicated like a user topic: each broker's topic-based RLMM reads it (KIP-405).
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"

#: The transaction coordinator's log (``server.txn.schema``, which replication does not import).
TRANSACTION_STATE_TOPIC = "__transaction_state"

#: Internal topics that are cluster topics: created through ZooKeeper and replicated. A
#: topic missing here is served by the single-node paths, which know only leader epoch 0:
#: its followers would be answered UNKNOWN_LEADER_EPOCH after the first election.
REPLICATED_INTERNAL_TOPICS = frozenset(
    {"__consumer_offsets", TRANSACTION_STATE_TOPIC, REMOTE_LOG_METADATA_TOPIC}
)

PartitionRoleListener = Callable[[Partition], None]
"""Told, on the loop, of each partition that became leader or follower at a new leader
epoch, and of each replica stopped here (``leader`` is then ``NO_LEADER``)."""


class LocalTopics(Protocol):
    """The broker's topic manager as replication uses it: local topics and their logs."""

    def get(self, name: str) -> Any: ...

    def get_log(self, topic: str, partition: int) -> PartitionLog | None: ...

    def open_log(self, topic: str, partition: int) -> PartitionLog | None: ...

    def close_log(self, topic: str, partition: int) -> Path | None: ...

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None: ...

    def all(self) -> list[Any]: ...

    def delete(self, name: str) -> Any: ...

    def effective_config(self, info: Any) -> dict[str, Any]: ...

    def replace_configs(self, name: str, configs: Mapping[str, str | None]) -> None: ...

    def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> Any: ...


class LeadershipListener(Protocol):
    """Told when this broker's role for a partition of one topic changes.

    Kafka's ``onLeadershipChange`` / ``onResignation`` callbacks of its coordinators: a
    coordinator whose state lives in a topic (groups in ``__consumer_offsets``, transactions
    in ``__transaction_state``) loads a partition when this broker becomes its leader and
    drops what it loaded when the broker stops leading it.

    Guarantees: every call runs on the event loop, synchronously inside the application of a
    partition state, so the calls for one partition arrive in leader-epoch order (a state is
    applied only when its epoch is higher, and a transition is reported once per epoch).
    ``became_leader`` is called once the ``Partition`` leads at ``leader_epoch`` (appends
    through it are stamped with that epoch); ``became_follower`` when a newer epoch makes
    another broker, or no broker, the leader; ``stopped`` when this broker no longer holds a
    replica (the topic was deleted or the replica moved away). A listener added while
    partitions exist is told their current role at once. Calls must not block: start the
    work (a load) as a task and check the epoch when it ends, as a newer call may have come
    meanwhile. An exception raised by a listener is logged and does not stop replication.
    """

    def became_leader(self, partition: int, leader_epoch: int) -> None: ...

    def became_follower(self, partition: int, leader_epoch: int) -> None: ...

    def stopped(self, partition: int) -> None: ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def fetcher_id(topic: str, index: int, fetchers: int) -> int:
    """F-1: which of ``num.replica.fetchers`` fetchers serves a partition (stable)."""
    return (31 * zlib.crc32(topic.encode()) + index) % max(fetchers, 1)


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        topics: LocalTopics,
        logs: LogManager,
        wake: Callable[[Key], None],
    ) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.topics = topics
        self.logs = logs
        self._wake = wake
        self.node: ClusterNode | None = None
        self.partitions: dict[Key, Partition] = {}
        self.produces = DelayedProduces()
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._retiring: set[ReplicaFetcher] = set()
        """Fetchers left idle, closing (``close`` finishes what a cancelled close left)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._creating: dict[str, asyncio.Task[None]] = {}
        self._topic_ready: dict[str, asyncio.Event] = {}
        self._closed = False
        self._stopping = False
        self._controlled_shutdown = False
        """Announced: leaderships moved away from here are not followed (see ``_apply``)."""
        self._changed = asyncio.Event()
        """Set whenever a view change was applied (controlled shutdown waits on it)."""
        self._broker_epochs: dict[int, int] = {}
        """The live brokers' epochs as last seen, to tell a broker's new life from its old."""
        self._applied = asyncio.Event()
        """Set, then replaced by a fresh one, whenever a partition state was applied."""
        self._view_applied = asyncio.Event()
        """Set, then replaced by a fresh one, after each change of the view was applied
        (CreatePartitions waits on it for the new partitions' leaders)."""
        self._pid_lock = asyncio.Lock()
        self._pid_block: ProducerIdBlock | None = None
        self._next_pid = 0
        self.lag_ms = int(config.get("replica.lag.time.max.ms"))
        self._fetch_settings = FetcherSettings(
            broker_id=self.broker_id,
            max_wait_ms=int(config.get("replica.fetch.wait.max.ms")),
            min_bytes=int(config.get("replica.fetch.min.bytes")),
            max_bytes=int(config.get("replica.fetch.response.max.bytes")),
            partition_max_bytes=int(config.get("replica.fetch.max.bytes")),
            backoff_ms=int(config.get("replica.fetch.backoff.ms")),
            request_timeout_s=int(config.get("replica.socket.timeout.ms")) / 1000,
            fetch_last_tiered_offset=bool(config.get("follower.fetch.last.tiered.offset.enable")),
        )
        self._num_fetchers = int(config.get("num.replica.fetchers"))
        windows = int(config.get("replication.quota.window.num"))
        window_s = int(config.get("replication.quota.window.size.seconds"))
        self.quotas = ReplicationQuotas(
            self.broker_id,
            ReplicationQuota(
                int(config.get("leader.replication.throttled.rate")), windows, window_s
            ),
            ReplicationQuota(
                int(config.get("follower.replication.throttled.rate")), windows, window_s
            ),
        )
        """Replication throttles (KIP-73): the rates are dynamic broker configs, the
        throttled partitions come from each topic's config (``_refresh_throttles``)."""
        self._leadership: dict[str, list[LeadershipListener]] = {}
        self._role_listeners: list[PartitionRoleListener] = []
        self._aux_source: RemoteAuxStateSource | None = None
        self.on_partitions_deleted: Callable[[str, list[int]], Awaitable[None]] | None = None
        """Called once per deleted topic with the partitions this broker led when the
        deletion reached it (the remote tier's stop hook), before its local files go."""
        self.topic_configs = TopicConfigSync(
            self._replace_configs,
            lambda name: topics.get(name) is not None,
            self._spawn,
            self._refresh_throttles,
        )
        """Follows ``/config/topics``; the server sets its ``apply`` (tiering reacts too)."""

    async def _replace_configs(self, name: str, config: Mapping[str, str]) -> None:
        self.topics.replace_configs(name, config)

    async def alter_topic_config(
        self,
        name: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        *,
        validate_only: bool,
    ) -> None:
        """AlterConfigs in cluster mode: see ``topic_configs``."""
        node, view = self.node, self.view
        if node is None or view is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "not in the cluster yet")
        zk = node.member.zk.kazoo
        await self.topic_configs.alter(
            functools.partial(read_topic_config, zk),
            functools.partial(write_topic_config, zk),
            view,
            name,
            change,
            validate_only=validate_only,
        )

    # ---- lifecycle -----------------------------------------------------------------------
    @property
    def view(self) -> ClusterView | None:
        return None if self.node is None else self.node.view

    async def start(self, node: ClusterNode, local_cluster_id: str) -> str:
        """Follow ``node``'s view from now on: every partition it already shows is applied.

        Returns the cluster id all brokers share: ``/cluster/id``, created with this
        broker's id by the first broker, as Kafka does."""
        self._loop = asyncio.get_running_loop()
        self.node = node
        cluster_id = await asyncio.to_thread(
            shared_cluster_id, node.member.zk.kazoo, local_cluster_id
        )
        view = node.view
        assert view is not None
        view.add_listener(self._on_view_change)
        self._broker_epochs = {b: live.broker_epoch for b, live in view.brokers().items()}
        for info in self.topics.all():
            assignment = view.topics().get(info.name)
            if self.manages(info.name) and (
                assignment is None
                or (
                    assignment.topic_id is not None
                    and topic_id_from_base64(assignment.topic_id) != info.topic_id
                )
            ):
                self._delete_local(info.name)
        for name in view.topics():
            self._ensure_topic(name)
        self._spawn(self._shrink_loop())
        return cluster_id

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Z-9/Z-10 over ZooKeeper: announce the shutdown (an ephemeral
        ``/tierlog/controlled_shutdown/<id>``) and wait until the controller has moved away
        every leadership another live in-sync replica can take, or ``timeout_s``. True if none
        is left. The broker keeps serving meanwhile, so clients follow the moves."""
        node = self.node
        if node is None or self._loop is None:
            return True
        self._controlled_shutdown = True
        try:
            await asyncio.to_thread(
                announce_controlled_shutdown, node.member.zk.kazoo, self.broker_id
            )
        except ZooKeeperError as e:
            log.warning("controlled shutdown not announced: %s", e)
            return False
        deadline = self._loop.time() + timeout_s
        while True:
            live = self.live_brokers()
            movable = [
                p.key
                for p in self.partitions.values()
                if p.is_leader and any(r != self.broker_id and r in live for r in p.isr)
            ]
            if not movable:
                log.info("controlled shutdown: no leadership left to move")
                return True
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                log.warning("controlled shutdown timed out still leading %s", movable)
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                pass

    def begin_shutdown(self) -> None:
        """The broker stops: acks=all appends waiting for followers answer
        NOT_LEADER_OR_FOLLOWER now (the producer retries on the next leader) instead of
        holding their connections through the shutdown grace period."""
        self._stopping = True
        self.produces.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    async def close(self) -> None:
        self._closed = True
        self._applied.set()
        view = self.view
        if view is not None:
            view.remove_listener(self._on_view_change)
        for task in [*self._tasks, *self._creating.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._creating.values(), return_exceptions=True)
        for fetcher in [*self._fetchers.values(), *self._retiring]:
            await fetcher.close()
        self._fetchers.clear()
        self._retiring.clear()
        self.produces.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = (self._loop or asyncio.get_running_loop()).create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("replication task failed", exc_info=task.exception())

    # ---- leadership listeners -------------------------------------------------------------
    def add_leadership_listener(self, topic: str, listener: LeadershipListener) -> None:
        """Follow this broker's role for ``topic``'s partitions (see ``LeadershipListener``);
        the partitions held now are reported at once, in index order."""
        self._leadership.setdefault(topic, []).append(listener)
        for key in sorted(k for k in self.partitions if k[0] == topic):
            p = self.partitions[key]
            if p.is_leader:
                self._tell(listener.became_leader, p.index, p.leader_epoch)
            elif p.leader_epoch >= 0:
                self._tell(listener.became_follower, p.index, p.leader_epoch)

    def remove_leadership_listener(self, topic: str, listener: LeadershipListener) -> None:
        listeners = self._leadership.get(topic, [])
        if listener in listeners:
            listeners.remove(listener)

    def _notify_leadership(self, p: Partition) -> None:
        for listener in list(self._leadership.get(p.topic, ())):
            if p.is_leader:
                self._tell(listener.became_leader, p.index, p.leader_epoch)
            else:
                self._tell(listener.became_follower, p.index, p.leader_epoch)

    @staticmethod
    def _tell(call: Callable[..., None], *args: int) -> None:
        try:
            call(*args)
        except Exception:
            log.exception("leadership listener %r failed", call)

    def set_remote_aux_source(self, source: RemoteAuxStateSource) -> None:
        """Tiered storage is on: followers behind a leader's local log start bootstrap from
        the remote tier through ``source`` (``replication.aux_state``)."""
        self._aux_source = source
        for fetcher in self._fetchers.values():
            fetcher.aux_source = source

    def add_partition_role_listener(self, listener: PartitionRoleListener) -> None:
        """Follow every partition's role here, whatever its topic (the remote log tasks of
        tiered partitions); ``add_leadership_listener`` follows one topic's partitions."""
        self._role_listeners.append(listener)

    def _role_changed(self, p: Partition) -> None:
        for listener in list(self._role_listeners):
            try:
                listener(p)
            except Exception:
                log.exception("%s-%d: leadership listener failed", *p.key)

    # ---- what handlers ask ---------------------------------------------------------------
    def manages(self, topic: str) -> bool:
        """A topic of the cluster (its replicas follow ZooKeeper): every topic but the
        internal ones not replicated yet, which stay local to each broker and keep the
        single-node paths. A topic the cluster does not know (deleted, or not created yet)
        is never served from a local leftover."""
        return topic not in INTERNAL_TOPICS or topic in REPLICATED_INTERNAL_TOPICS

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_for(
        self, topic: str, index: int, current_leader_epoch: int = -1
    ) -> tuple[Partition | None, ErrorCode | None]:
        """The partition if this broker leads it at ``current_leader_epoch``, else the error
        (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH)."""
        p = self.partitions.get((topic, index))
        if p is None:
            view = self.view
            if view is not None and topic not in view.topics():
                return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        error = p.check_leader(current_leader_epoch)
        return (p, None) if error is None else (None, error)

    def current_leader(self, topic: str, index: int) -> tuple[int, int] | None:
        """KIP-951: the (leader id, leader epoch) a client told NOT_LEADER_OR_FOLLOWER here
        should go to, as this broker knows it; None when that is no other live broker."""
        view = self.view
        info = None if view is None else view.partition(topic, index)
        state = None if info is None else info.state
        held = self.partitions.get((topic, index))
        if held is not None and (state is None or held.leader_epoch > state.leader_epoch):
            leader, epoch = held.leader, held.leader_epoch
        elif state is not None:
            leader, epoch = state.leader, state.leader_epoch
        else:
            return None
        if leader in (NO_LEADER, self.broker_id) or leader not in self.live_brokers():
            return None
        return leader, epoch

    async def wait_for_leader_epoch(self, topic: str, index: int, epoch: int) -> None:
        """Wait until this broker has applied ``epoch`` of the partition, at most
        ``replica.fetch.wait.max.ms``.

        A follower that read the new state from ZooKeeper before its new leader did asks
        the leader with an epoch the leader does not know yet; answered at once with
        UNKNOWN_LEADER_EPOCH, it would back off ``replica.fetch.backoff.ms`` and hold every
        acks=all produce of the new leader that long. The state is on its way through this
        broker's watch, so the question waits for it, as a follower's fetch may wait here
        anyway. Waiters hold one shared event; their number is bounded by the requests in
        flight."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._fetch_settings.max_wait_ms / 1000
        while True:
            p = self.partitions.get((topic, index))
            remaining = deadline - loop.time()
            if (p is not None and p.leader_epoch >= epoch) or remaining <= 0 or self._closed:
                return
            try:
                await asyncio.wait_for(self._applied.wait(), remaining)
            except TimeoutError:
                return

    def live_brokers(self) -> set[int]:
        view = self.view
        return set() if view is None else set(view.brokers())

    def _isr_candidates(self) -> set[int]:
        """Brokers a follower may join the ISR from: live and not in a controlled shutdown
        (KIP-841). A stopping broker keeps fetching until it leaves; taking it back into
        the ISR would only make the controller remove it again with one more leader
        epoch, which every follower and producer then has to follow."""
        view = self.view
        return set() if view is None else set(view.brokers()) - view.shutting_down()

    def after_leader_append(self, p: Partition) -> None:
        """L-4: followers' fetches parked in the purgatory read the new batch now (an
        acks=all append waits for them), and the ISR may be just the leader, so the HW may
        move at once."""
        self._wake(p.key)
        self._maybe_advance(p)

    async def wait_for_acks(
        self, p: Partition, required_offset: int, timeout_s: float
    ) -> ErrorCode:
        """L-7: the answer of an acks=all append once the HW reaches ``required_offset``."""
        code = p.produce_outcome(required_offset)
        if code is not None:
            return code
        if self._stopping:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return await self.produces.wait(p.key, required_offset, timeout_s)

    def on_follower_fetch(
        self, topic: str, index: int, replica: int, fetch_offset: int, leader_leo: int
    ) -> None:
        """L-9: a follower read at ``fetch_offset`` (its LEO) succeeded."""
        p = self.partitions.get((topic, index))
        if p is None or not p.is_leader:
            return
        p.record_follower_fetch(replica, fetch_offset, -1, leader_leo, _now_ms())
        expanded = p.isr_to_expand(replica, self._isr_candidates())
        if expanded is not None:
            self._write_isr(p, expanded)
        self._maybe_advance(p)

    async def allocate_producer_id(self) -> int:
        """A producer id no other broker of the cluster hands out (InitProducerId)."""
        async with self._pid_lock:
            if self._pid_block is None or self._next_pid > self._pid_block.end:
                node = self.node
                if node is None:
                    raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "not in the cluster yet")
                self._pid_block = await asyncio.to_thread(
                    claim_producer_ids, node.member.zk.kazoo, self.broker_id
                )
                self._next_pid = self._pid_block.start
            pid = self._next_pid
            self._next_pid += 1
            return pid

    async def wait_topic(self, name: str, timeout_s: float) -> bool:
        """Wait until the local topic for ``name`` exists (after CreateTopics)."""
        if self.topics.get(name) is not None:
            return True
        event = self._topic_ready.setdefault(name, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    async def wait_partitions(self, topic: str, count: int, timeout_s: float) -> bool:
        """Wait until this broker's view shows partitions ``[0, count)`` of ``topic`` each
        with a leader, and its local topic has grown to them (after CreatePartitions, as
        Kafka's DelayedCreatePartitions waits for its metadata cache). False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            view, info = self.view, self.topics.get(topic)
            if view is not None and info is not None and info.partitions >= count:
                states = [view.partition(topic, p) for p in range(count)]
                if all(s is not None and s.state is not None for s in states):
                    return True
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closed:
                return False
            try:
                await asyncio.wait_for(self._view_applied.wait(), remaining)
            except TimeoutError:
                return False

    # ---- view changes --------------------------------------------------------------------
    def _on_view_change(self, change: ViewChange) -> None:
        """The view's listener (kazoo's thread): hand the change to the loop."""
        loop = self._loop
        if loop is None or self._closed:
            return
        try:
            loop.call_soon_threadsafe(self._apply_change, change)
        except RuntimeError:  # the loop is closed: shutting down
            pass

    def _apply_change(self, change: ViewChange) -> None:
        if self._closed:
            return
        self._changed.set()
        try:
            self._dispatch(change)
        finally:
            applied, self._view_applied = self._view_applied, asyncio.Event()
            applied.set()

    def _dispatch(self, change: ViewChange) -> None:
        if isinstance(change, PartitionChanged):
            if self.topics.get(change.info.topic) is None:
                self._ensure_topic(change.info.topic)
            else:
                self._apply(change.info)
        elif isinstance(change, TopicDeleted):
            self._delete_local(change.topic)
        elif isinstance(change, TopicConfigChanged):
            view = self.view
            if view is not None:
                self.topic_configs.sync(change.topic, view)
        elif isinstance(change, BrokersChanged):
            epochs = {b: live.broker_epoch for b, live in change.brokers.items()}
            changed = {b for b, e in self._broker_epochs.items() if epochs.get(b) != e}
            self._broker_epochs = epochs
            for p in self.partitions.values():
                if p.is_leader:
                    p.forget_followers(changed)
                    self._maybe_advance(p)

    def _delete_local(self, topic: str) -> None:
        """The topic left ZooKeeper (deleted, here or while this broker was down): stop its
        replicas, run the deletion hook for those it led, then delete its local files."""
        led = sorted(i for (t, i), p in self.partitions.items() if t == topic and p.is_leader)
        for key in [k for k in self.partitions if k[0] == topic]:
            self._stop_replica(key)
        self.topic_configs.forget(topic)
        self.quotas.topic_config(topic, (), ())
        info = self.topics.get(topic)
        if info is None:
            return
        log.info(
            "%s: deleted from the cluster; removing the local replicas (leader of %s)",
            topic,
            led,
        )
        hook = self.on_partitions_deleted
        if not led or hook is None:
            self.topics.delete(topic)
            return

        async def remove() -> None:
            await hook(topic, led)
            if self.topics.get(topic) is not info:
                return
            for key in [k for k in self.partitions if k[0] == topic]:
                self._stop_replica(key)  # a topic re-created meanwhile found the old logs
            self.topics.delete(topic)
            view = self.view
            if view is not None and topic in view.topics():
                self._ensure_topic(topic)

        self._spawn(remove())

    def _ensure_topic(self, name: str) -> None:
        if self.topics.get(name) is not None:
            view = self.view
            if view is not None:
                self.topic_configs.sync(name, view)
            self._apply_topic(name)
            return
        if name not in self._creating:
            self._creating[name] = asyncio.get_running_loop().create_task(self._create_local(name))

    async def _create_local(self, name: str) -> None:
        try:
            view, node = self.view, self.node
            assert view is not None and node is not None
            assignment = view.topics().get(name)
            if assignment is None:
                return
            cfg = view.topic_config(name)
            if cfg is None:
                configs = await asyncio.to_thread(topic_config, node.member.zk.kazoo, name)
                cfg = TopicConfig(configs, -1, assignment.topic_id)
            if self.topics.get(name) is None:
                topic_id = (
                    topic_id_from_base64(assignment.topic_id) if assignment.topic_id else None
                )
                try:
                    self.topics.create(
                        name, len(assignment.partitions), 1, cfg.config, topic_id=topic_id
                    )
                except KafkaError as e:
                    log.error("cannot create local topic %s: %s", name, e)
                    return
                self.topic_configs.created(name, cfg)
            self.topic_configs.sync(name, view)
            event = self._topic_ready.pop(name, None)
            if event is not None:
                event.set()
            self._apply_topic(name)
        except Exception:
            log.exception("creating local topic %s failed", name)
        finally:
            self._creating.pop(name, None)

    def _refresh_throttles(self, name: str) -> None:
        """The topic's throttled replicas, read once per config change (never per fetch)."""
        info = self.topics.get(name)
        if info is None:
            self.quotas.topic_config(name, (), ())
            return
        eff = self.topics.effective_config(info)
        self.quotas.topic_config(
            name,
            eff["leader.replication.throttled.replicas"],
            eff["follower.replication.throttled.replicas"],
        )

    def should_leader_throttle(self, topic: str, index: int, replica_id: int) -> bool:
        """Kafka's ``shouldLeaderThrottle``: a follower outside the ISR fetching a throttled
        partition while the leader quota is exceeded gets no records for it this time."""
        p = self.partitions.get((topic, index))
        quota = self.quotas.leader
        return (
            p is not None
            and replica_id not in p.isr
            and quota.is_throttled(topic, index)
            and quota.is_exceeded()
        )

    def _apply_topic(self, name: str) -> None:
        self._refresh_throttles(name)
        view = self.view
        if view is None:
            return
        for info in view.partitions(name).values():
            self._apply(info)

    def _apply(self, info: PartitionInfo) -> None:
        key = (info.topic, info.partition)
        state = info.state
        hosted = self.broker_id in info.replicas or self.broker_id in info.adding
        self._grow_topic(info.topic, info.partition)
        if state is None:
            return
        if not hosted:
            if key in self.partitions:
                self._stop_replica(key)
            self._drop_stray_log(info)
            return
        plog = self.topics.open_log(info.topic, info.partition)
        if plog is None:
            log.warning("%s-%d: no local topic", *key)
            return
        p = self.partitions.get(key)
        if p is None:
            p = Partition(info.topic, info.partition, self.broker_id, plog)
            if not plog.replicated:
                ckpt = self.logs.checkpointed_high_watermark(TopicPartition(*key))
                plog.set_high_watermark(0 if ckpt is None else ckpt)
            self.partitions[key] = p
        topic_info = self.topics.get(info.topic)
        if topic_info is not None:
            p.min_insync_replicas = int(
                self.topics.effective_config(topic_info)["min.insync.replicas"]
            )
        was_leader = p.is_leader
        changed = p.apply_state(state, info.partition_epoch, info.replicas, _now_ms())
        if changed:
            self._wake(key)  # waiting fetches answer under the new leadership
            log.info(
                "%s-%d: %s at leader epoch %d (leader %d, isr %s)",
                *key,
                "leader" if p.is_leader else "follower",
                p.leader_epoch,
                p.leader,
                list(p.isr),
            )
        if p.is_leader:
            self._remove_from_fetchers(key)
            self._maybe_advance(p)
            self._bump_epoch(p)
        else:
            if was_leader or changed:
                self._check_produces(p)
            if p.leader == NO_LEADER or (was_leader and self._controlled_shutdown):
                # a leadership moved away by this broker's controlled shutdown is not
                # followed (Kafka's controller sends the stopping broker StopReplica): the
                # new leader, whose view of the shutdown may lag its leadership, would take
                # it back into the ISR, and the controller's removal cost one more epoch
                self._remove_from_fetchers(key)
            elif changed:
                self._add_to_fetcher(p)
        if changed:
            self._notify_leadership(p)
            self._role_changed(p)
            applied, self._applied = self._applied, asyncio.Event()
            applied.set()

    def _grow_topic(self, topic: str, partition: int) -> None:
        """A partition beyond the local topic's count was added to the cluster's topic
        (CreatePartitions): the local definition grows to the view's count."""
        info = self.topics.get(topic)
        view = self.view
        if info is None or partition < info.partitions:
            return
        count = partition + 1
        if view is not None:
            count = max(count, len(view.partitions(topic)))
        try:
            self.topics.create_partitions(topic, count)
        except KafkaError as e:
            log.error("%s: cannot grow the local topic to %d partitions: %s", topic, count, e)
            return
        log.info("%s: %d partitions", topic, count)

    def _drop_stray_log(self, info: PartitionInfo) -> None:
        """A partition this broker is not a replica of has no log here: a replica the
        controller removed (a reassignment that completed, also while this broker was down)
        frees its disk, as Kafka's StopReplica with delete does. The log is forgotten at
        once, so a later reassignment back starts a fresh one that fetches from the leader's
        log start; its files are deleted off the loop. The remote tier is the topic's and
        stays."""
        path = self.topics.close_log(info.topic, info.partition)
        if path is None:
            return
        log.info(
            "%s-%d: not a replica here (replicas %s): deleting the local log",
            info.topic,
            info.partition,
            list(info.replicas),
        )
        self._spawn(asyncio.to_thread(shutil.rmtree, path, ignore_errors=True))

    def _stop_replica(self, key: Key) -> None:
        p = self.partitions.pop(key, None)
        self._remove_from_fetchers(key)
        if p is not None:
            p.leader = NO_LEADER
            self._check_produces(p)
            for listener in list(self._leadership.get(key[0], ())):
                self._tell(listener.stopped, key[1])
            self._role_changed(p)

    # ---- fetchers ------------------------------------------------------------------------
    def _add_to_fetcher(self, p: Partition) -> None:
        self._remove_from_fetchers(p.key, keep_leader=p.leader)
        fid = fetcher_id(p.topic, p.index, self._num_fetchers)
        fetcher = self._fetchers.get((p.leader, fid))
        if fetcher is None:
            leader = p.leader
            fetcher = ReplicaFetcher(
                leader,
                fid,
                self._fetch_settings,
                lambda: self._endpoint(leader),
                self._on_follower_appended,
                self._aux_source,
                self.quotas.follower,
            )
            self._fetchers[(leader, fid)] = fetcher
            fetcher.start()
        fetcher.add(p.topic, p.index, p.log, p.leader_epoch)

    def _remove_from_fetchers(self, key: Key, keep_leader: int | None = None) -> None:
        """Take ``key`` off every fetcher but ``keep_leader``'s; a fetcher left without
        partitions is closed with its connection (Kafka's ``shutdownIdleFetcherThreads``).

        A fetcher kept idle would hold a connection to a broker that may stop and come
        back: the next leadership there would first fail on the dead socket and back off
        ``replica.fetch.backoff.ms`` before reconnecting, holding every acks=all produce
        of the new leader for that long."""
        for fkey, fetcher in list(self._fetchers.items()):
            if fkey[0] == keep_leader:
                continue
            fetcher.remove(key)
            if not fetcher.partitions:
                del self._fetchers[fkey]
                self._retire(fetcher)

    def _retire(self, fetcher: ReplicaFetcher) -> None:
        self._retiring.add(fetcher)

        async def close() -> None:
            try:
                await fetcher.close()
            finally:
                self._retiring.discard(fetcher)

        self._spawn(close())

    def endpoint_of(self, broker: int) -> tuple[str, int] | None:
        """Where a live broker serves (its first advertised listener), or None."""
        return self._endpoint(broker)

    def _endpoint(self, broker: int) -> tuple[str, int] | None:
        view = self.view
        if view is None:
            return None
        live = view.brokers().get(broker)
        if live is None or not live.registration.endpoints:
            return None
        e = live.registration.endpoints[0]
        return e.host or "127.0.0.1", e.port

    def _on_follower_appended(self, key: Key) -> None:
        self._wake(key)

    # ---- leader: HW, ISR, waiters --------------------------------------------------------
    def _maybe_advance(self, p: Partition) -> None:
        if p.maybe_advance_high_watermark(_now_ms(), self.lag_ms, self._isr_candidates):
            self._wake(p.key)
        self._check_produces(p)

    def _check_produces(self, p: Partition) -> None:
        self.produces.check(p.key, p.produce_outcome)

    async def _shrink_loop(self) -> None:
        """L-14: every ``replica.lag.time.max.ms / 2``, drop followers that fell behind.

        The HW is looked at too: a follower outside the ISR that stops fetching holds it
        until it has lagged for ``replica.lag.time.max.ms``, and no fetch or append may come
        to move it after that.
        """
        interval = max(self.lag_ms / 2, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            now = _now_ms()
            for p in list(self.partitions.values()):
                if p.is_leader:
                    self._maybe_advance(p)
                shrunk = p.isr_to_shrink(now, self.lag_ms)
                if shrunk is not None:
                    log.info("%s-%d: shrinking ISR %s -> %s", *p.key, list(p.isr), list(shrunk))
                    self._write_isr(p, shrunk)

    def _write_isr(self, p: Partition, isr: tuple[int, ...]) -> None:
        """One conditional write of the state znode with the new ISR (L-17, L-18)."""
        node = self.node
        if node is None or p.pending_isr is not None:
            return
        p.pending_isr = isr
        epoch, version = p.leader_epoch, p.partition_epoch
        data = p.state_with_isr(isr).encode()
        zk = node.member.zk.kazoo

        async def write() -> None:
            written = None
            try:
                written = await asyncio.to_thread(
                    write_partition_state, zk, p.topic, p.index, data, version
                )
                if written is None:
                    log.info("%s-%d: ISR write lost to a newer state", *p.key)
            except ZooKeeperError as e:
                log.warning("%s-%d: ISR write failed: %s", *p.key, e)
            except BaseException:
                p.pending_isr = None
                raise
            if p.pending_isr == isr:
                ours = written is not None and p.leader_epoch == epoch
                if ours and written is not None and p.partition_epoch < written:
                    p.isr_written(isr, written)
                    log.info("%s-%d: ISR now %s", *p.key, list(isr))
                else:
                    p.pending_isr = None
            self._maybe_advance(p)

        self._spawn(write())

    def _bump_epoch(self, p: Partition) -> None:
        """Rewrite the state with the epoch above the log's checkpoint (``Partition.epoch_bump``),
        conditional on the partition epoch; the view brings back whichever state won."""
        bumped = p.state_with_epoch_bump()
        node = self.node
        if bumped is None or node is None or p.pending_isr is not None:
            return
        log.info(
            "%s-%d: leader epoch %d -> %d (above the checkpoint)",
            *p.key,
            p.leader_epoch,
            bumped.leader_epoch,
        )
        zk, version, data = node.member.zk.kazoo, p.partition_epoch, bumped.encode()

        async def write() -> None:
            try:
                await asyncio.to_thread(write_partition_state, zk, p.topic, p.index, data, version)
            except ZooKeeperError as e:
                log.warning("%s-%d: epoch bump failed: %s", *p.key, e)

        self._spawn(write())


def replication_for(
    config: BrokerConfig,
    topics: LocalTopics,
    logs: LogManager,
    wake: Callable[[Key], None],
) -> ReplicaManager | None:
    """The replication layer in cluster mode (``zookeeper.connect`` set), else None."""
    if config.get("zookeeper.connect") is None:
        return None
    return ReplicaManager(config, topics, logs, wake)
