"""Tiered storage inside the broker: builds the RemoteLogManager and drives its lifecycle.

The broker never imports a concrete plugin. ``remote.log.storage.manager.class.name`` and
``remote.log.metadata.manager.class.name`` are resolved here through the alias tables of
``tierlog.tiered.api`` and ``tierlog.tiered.metadata`` (``module:Class`` also works), and the
topic-based RLMM is bound to ``__remote_log_metadata`` in the broker's own log engine.

tierlog deviates from Kafka on one default, on purpose: ``remote.log.storage.system.enable``
is true and the storage plugin defaults to ``objectstore``, whose own default
(``RemoteStorageManager.default_config``, derived from the log dirs) is a directory next to the
first log dir, so a broker started with no configuration tiers any topic created with
``remote.storage.enable=true``. Topics still opt in, as in Kafka.

What the broker reports (each call is cheap on the loop unless said otherwise):

* startup: every tiered log is led here (single node), after the RLMM is initialized; an
  RLMM that cannot initialize within its timeout stops the broker (``TieringStartupError``);
* cluster mode (``zookeeper.connect``): ``__remote_log_metadata`` is a replicated topic
  (``server.metadata_topic.ReplicatedMetadataTopicIO``) that the RLMM initializes in the
  background once the broker has joined (``attach_replication``); from then on the tasks of
  each tiered partition follow the replication layer's leadership, and its followers can
  bootstrap from the remote tier. The remote tier must be one store that every broker
  reaches: the embedded default (a directory next to each broker's log dir) is not, and the
  broker warns about it;
* topic or partition creation: ``partitions_added``;
* topic deletion: ``before_topic_delete`` deletes the remote data first (blocking work on a
  worker thread), because the local log and its topic id are gone afterwards;
* config changes: ``config_snapshot`` before, ``after_config_change`` after, which turns
  copy off/on, starts tiering a topic, or deletes the remote data when tiering is turned off;
* shutdown: ``close`` (the manager closes both plugins; nothing else may).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from tierlog.cluster.znodes import NO_LEADER
from tierlog.config.broker import BrokerConfig
from tierlog.log import LogManager, PartitionLog, TopicPartition
from tierlog.replication.aux_state import (
    AuxStateUnavailable,
    RemoteAuxState,
    RemoteAuxStateSource,
)
from tierlog.replication.manager import ReplicaManager
from tierlog.replication.partition import Partition
from tierlog.server.metadata_topic import (
    LogMetadataTopicIO,
    ReplicatedMetadataTopicIO,
    loop_topic_creator,
)
from tierlog.server.purgatory import FetchPurgatory
from tierlog.server.topics import TopicManager
from tierlog.tiered.api import (
    RSM_ALIASES,
    RSM_CLASS_KEY,
    PluginLoadError,
    RemoteStorageManager,
    SupportsMetadataTopic,
    plugin_class,
)
from tierlog.tiered.manager import (
    RemoteLogManager,
    RemoteLogManagerConfig,
    RemoteMetrics,
    StopPartition,
)
from tierlog.tiered.manager.server_hooks import build_remote_log_manager
from tierlog.tiered.metadata import METADATA_TOPIC, RLMM_ALIASES

__all__ = [
    "PluginSettings",
    "Tiering",
    "TieringStartupError",
    "plugin_settings",
]

log = logging.getLogger(__name__)

_NUM_PARTITIONS_KEY = "remote.log.metadata.topic.num.partitions"
_REPLICATION_FACTOR_KEY = "remote.log.metadata.topic.replication.factor"


class TieringStartupError(RuntimeError):
    """Tiered storage cannot start; the broker must not serve tiered partitions wrongly."""


@dataclass(frozen=True)
class PluginSettings:
    rsm_class: str
    rsm_props: Mapping[str, str]
    rlmm_class: str
    rlmm_props: Mapping[str, str]


def _rsm_defaults(rsm_class: str, log_dirs: Sequence[Path]) -> Mapping[str, str]:
    """The storage plugin's own defaults, asked of its class; none when the class cannot be
    loaded (building the manager then fails, naming the key)."""
    base: type[RemoteStorageManager] = RemoteStorageManager  # type: ignore[type-abstract]
    try:
        cls = plugin_class(rsm_class, base, RSM_ALIASES, config_key=RSM_CLASS_KEY)
    except PluginLoadError:
        return {}
    return cls.default_config(log_dirs)


def plugin_settings(cfg: BrokerConfig) -> PluginSettings:
    """Resolve the plugin classes; the storage plugin's defaults go under its settings."""
    rsm_name = str(cfg.values[RSM_CLASS_KEY])
    rsm_class = RSM_ALIASES.get(rsm_name, rsm_name)
    rsm_props = {**_rsm_defaults(rsm_class, cfg.log_dirs), **cfg.rsm_config}
    rlmm_name = str(cfg.values["remote.log.metadata.manager.class.name"])
    return PluginSettings(
        rsm_class, rsm_props, RLMM_ALIASES.get(rlmm_name, rlmm_name), dict(cfg.rlmm_config)
    )


class _RemoteAuxState(RemoteAuxStateSource):
    """The remote tier as replication's bootstrapping followers read it."""

    def __init__(self, rlm: RemoteLogManager) -> None:
        self._rlm = rlm

    def aux_state(self, log: PartitionLog, epoch: int, offset: int) -> RemoteAuxState:
        try:
            got = self._rlm.segment_aux_state(log, epoch, offset)
        except Exception as e:
            raise AuxStateUnavailable(str(e)) from e
        return RemoteAuxState(got.next_offset, got.epochs, got.producer_snapshot)


class Tiering:
    """The broker's RemoteLogManager plus the bookkeeping of what it was told."""

    def __init__(
        self,
        rlm: RemoteLogManager,
        topics: TopicManager,
        logs: LogManager,
    ) -> None:
        self.rlm = rlm
        self._topics = topics
        self._logs = logs
        self._closed = False
        self._cluster = False
        """Cluster mode: leadership comes from the replication layer (``attach_replication``)."""
        self._metadata_io: ReplicatedMetadataTopicIO | None = None
        """Cluster mode with the topic-based RLMM: ``__remote_log_metadata`` is replicated."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._repl: ReplicaManager | None = None

    # ---- startup ------------------------------------------------------------------------
    @classmethod
    async def start(
        cls,
        cfg: BrokerConfig,
        topics: TopicManager,
        logs: LogManager,
        purgatory: FetchPurgatory,
        registry: CollectorRegistry,
    ) -> Tiering:
        """Build the manager, bind and initialize the RLMM, then lead every tiered log."""
        loop = asyncio.get_running_loop()
        settings = plugin_settings(cfg)
        try:
            rlm = await asyncio.to_thread(
                build_remote_log_manager,
                RemoteLogManagerConfig.from_broker_config(cfg),
                settings.rsm_class,
                settings.rsm_props,
                settings.rlmm_class,
                settings.rlmm_props,
                cfg.log_dirs[0],
                rlmm_aliases=RLMM_ALIASES,
                metrics=RemoteMetrics(registry),
            )
        except Exception as e:
            raise TieringStartupError(f"cannot load the tiered storage plugins: {e}") from e
        tiering = cls(rlm, topics, logs)
        try:
            if cfg.get("zookeeper.connect") is not None:
                tiering._cluster = True
                if not cfg.rsm_config:
                    log.warning(
                        "cluster mode with the storage plugin's embedded default (%s): each "
                        "broker tiers to its own store, so replicas cannot read what another "
                        "leader uploaded; configure one remote store shared by every broker",
                        dict(settings.rsm_props),
                    )
                tiering._bind_replicated_metadata_topic(loop, logs, settings)
            else:
                await tiering._bind_metadata_topic(loop, topics, logs, purgatory, settings)
        except BaseException:
            await asyncio.to_thread(rlm.close)
            raise
        rlm.startup()
        tiering.partitions_added(lg.tp.topic for lg in logs.all_logs())
        return tiering

    def _bind_replicated_metadata_topic(
        self, loop: asyncio.AbstractEventLoop, logs: LogManager, settings: PluginSettings
    ) -> None:
        """Cluster mode: the RLMM gets the replicated topic; it initializes in the background
        once the broker has joined (``attach_replication``), because creating the topic
        needs a controller and enough live brokers, which a starting broker cannot wait for."""
        rlmm = self.rlm.rlmm
        if not isinstance(rlmm, SupportsMetadataTopic):
            return
        rf = int(settings.rlmm_props.get(_REPLICATION_FACTOR_KEY, "3"))
        self._metadata_io = ReplicatedMetadataTopicIO(logs, loop, rf)
        rlmm.bind_metadata_topic(self._metadata_io)

    def attach_replication(self, repl: ReplicaManager) -> None:
        """Cluster mode, once the broker has joined: the metadata topic goes through ``repl``
        and the tasks of each tiered partition follow its leadership from now on."""
        self._repl = repl
        if self._metadata_io is not None:
            self._metadata_io.attach(repl)
        repl.set_remote_aux_source(_RemoteAuxState(self.rlm))
        repl.add_partition_role_listener(self._leadership_changed)
        for p in list(repl.partitions.values()):
            self._leadership_changed(p)
        rlmm = self.rlm.rlmm
        if isinstance(rlmm, SupportsMetadataTopic):
            self._spawn(self._await_metadata(rlmm))

    async def _await_metadata(self, rlmm: SupportsMetadataTopic) -> None:
        started = time.monotonic()
        try:
            await asyncio.to_thread(rlmm.await_initialized)
        except Exception as e:
            log.error(
                "remote log metadata manager failed to initialize; tiered partitions are not "
                "served: %s",
                e,
            )
            return
        log.info("remote log metadata ready in %.2fs", time.monotonic() - started)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _leadership_changed(self, p: Partition) -> None:
        """A new leader epoch (or the replica stopped here): the partition's tasks are
        cancelled and started for its new role (spec §5.3, 36)."""
        lg = p.log
        if self._closed or not lg.remote_enabled:
            return
        repl = self._repl
        if p.leader == NO_LEADER and (repl is None or repl.partition(*p.key) is not p):
            self._spawn(asyncio.to_thread(self.rlm.stop_partitions, [StopPartition(lg)]))
        elif p.is_leader:
            log.info("%s: remote log tasks of the leader at epoch %d", lg.tp, p.leader_epoch)
            self.rlm.on_leadership_change([lg], restart=True)
        else:
            log.info("%s: remote log tasks of a follower at epoch %d", lg.tp, p.leader_epoch)
            self.rlm.on_leadership_change([], [lg], restart=True)
        self._register_metrics([lg])

    async def _bind_metadata_topic(
        self,
        loop: asyncio.AbstractEventLoop,
        topics: TopicManager,
        logs: LogManager,
        purgatory: FetchPurgatory,
        settings: PluginSettings,
    ) -> None:
        rlmm = self.rlm.rlmm
        if not isinstance(rlmm, SupportsMetadataTopic):
            return  # another RLMM: it reaches its store by itself

        def create(num_partitions: int, configs: Mapping[str, str]) -> None:
            topics.ensure(METADATA_TOPIC, num_partitions, dict(configs))

        def woke(partition: int) -> None:
            loop.call_soon_threadsafe(purgatory.notify, (METADATA_TOPIC, partition))

        rlmm.bind_metadata_topic(
            LogMetadataTopicIO(logs, create_topic=loop_topic_creator(loop, create), on_append=woke)
        )
        started = time.monotonic()
        try:
            await asyncio.to_thread(rlmm.await_initialized)
        except Exception as e:
            raise TieringStartupError(
                f"remote log metadata manager failed to initialize: {e}"
            ) from e
        log.info(
            "remote log metadata ready in %.2fs (%s=%s)",
            time.monotonic() - started,
            _NUM_PARTITIONS_KEY,
            settings.rlmm_props.get(_NUM_PARTITIONS_KEY, "50"),
        )

    # ---- topic events -------------------------------------------------------------------
    def _logs_of(self, topic: str) -> list[PartitionLog]:
        info = self._topics.get(topic)
        if info is None:
            return []
        out = []
        for p in range(info.partitions):
            lg = self._logs.get_log(TopicPartition(topic, p))
            if lg is not None:
                out.append(lg)
        return out

    def partitions_added(self, topics: Iterable[str]) -> None:
        """New (or newly loaded) partitions: this single-node broker leads them all. In
        cluster mode leadership comes from the replication layer instead."""
        if self._closed or self._cluster:
            return
        leaders = [
            lg for t in dict.fromkeys(topics) for lg in self._logs_of(t) if lg.remote_enabled
        ]
        if leaders:
            self.rlm.on_leadership_change(leaders)
        self._register_metrics(leaders)

    def _register_metrics(self, logs: Iterable[PartitionLog]) -> None:
        m = self.rlm.metrics
        for lg in logs:
            # every series exists from the start at 0, so dashboards and rate() see the first
            # error instead of a series appearing out of nothing
            for counter in (
                m.copy_requests,
                m.copy_bytes,
                m.copy_errors,
                m.fetch_requests,
                m.fetch_bytes,
                m.fetch_ready,
                m.fetch_expires,
                m.fetch_taken_over,
                m.fetch_errors,
                m.delete_requests,
                m.delete_errors,
            ):
                counter.labels(lg.tp.topic, str(lg.tp.partition))

    async def before_topic_delete(
        self, topic: str, partitions: Iterable[int] | None = None
    ) -> None:
        """Delete the topic's remote data (DELETE_STARTED .. partition delete records) while
        its logs still exist. A failure is logged, not raised: the topic goes anyway, as in
        Kafka, and its metadata records say which segments were left behind. Each partition's
        remote data is deleted once, by its leader (spec §7, 14): in cluster mode the deletion
        names ``partitions``, those this broker led when it reached it; the other replicas only
        stop their tasks."""
        if self._closed:
            return
        wanted = None if partitions is None else set(partitions)
        stops = [
            StopPartition(
                lg,
                delete_remote_log=(
                    self._leads(lg) if wanted is None else lg.tp.partition in wanted
                ),
            )
            for lg in self._logs_of(topic)
            if lg.remote_enabled
        ]
        if not stops:
            return
        try:
            await asyncio.to_thread(self.rlm.stop_partitions, stops)
        except Exception:
            log.exception("deleting the remote data of topic %s failed", topic)

    def _leads(self, lg: PartitionLog) -> bool:
        """This broker may act as the partition's leader on its remote data: always in single
        node mode, only while leading in cluster mode."""
        if not self._cluster:
            return True
        p = None if self._repl is None else self._repl.partition(*lg.tp)
        return p is not None and p.is_leader

    def config_snapshot(self, topic: str) -> dict[TopicPartition, bool]:
        return {lg.tp: lg.remote_enabled for lg in self._logs_of(topic)}

    async def after_config_change(self, topic: str, before: Mapping[TopicPartition, bool]) -> None:
        """Apply a topic config change: tiering turned off deletes the remote data (the
        config layer already required ``remote.log.delete.on.disable=true``); anything else
        (copy disabled or re-enabled, tiering turned on) re-syncs the partition's tasks."""
        if self._closed:
            return
        for lg in self._logs_of(topic):
            was = before.get(lg.tp, False)
            p = None if self._repl is None else self._repl.partition(*lg.tp)
            if self._cluster and not self.rlm.tasks_of(lg.tp) and p is not None:
                self._leadership_changed(p)  # tiering turned on: tasks for its current role
            elif was and not lg.remote_enabled and not self._leads(lg):
                await asyncio.to_thread(self.rlm.stop_partitions, [StopPartition(lg)])
            elif was and not lg.remote_enabled:
                try:
                    await asyncio.to_thread(self.rlm.disable_remote, lg)
                except Exception:
                    log.exception("%s: deleting remote data after disabling tiering failed", lg.tp)
            elif lg.remote_enabled:
                self.rlm.on_config_change(lg)

    # ---- shutdown -----------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the tasks and close both plugins (via the manager); idempotent."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._metadata_io is not None:
            await self._metadata_io.aclose()
        await asyncio.to_thread(self.rlm.close)
