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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from tierlog.config.broker import BrokerConfig
from tierlog.log import LogManager, PartitionLog, TopicPartition
from tierlog.server.metadata_topic import LogMetadataTopicIO, loop_topic_creator
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
            await tiering._bind_metadata_topic(loop, topics, logs, purgatory, settings)
        except BaseException:
            await asyncio.to_thread(rlm.close)
            raise
        rlm.startup()
        tiering.partitions_added(lg.tp.topic for lg in logs.all_logs())
        return tiering

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
        """New (or newly loaded) partitions: this single-node broker leads them all."""
        if self._closed:
            return
        leaders = [
            lg for t in dict.fromkeys(topics) for lg in self._logs_of(t) if lg.remote_enabled
        ]
        if leaders:
            self.rlm.on_leadership_change(leaders)
        m = self.rlm.metrics
        for lg in leaders:
            # every series exists from the start at 0, so dashboards and rate() see the first
            # error instead of a series appearing out of nothing
            for counter in (
                m.copy_requests,
                m.copy_bytes,
                m.copy_errors,
                m.fetch_requests,
                m.fetch_bytes,
                m.fetch_errors,
                m.delete_requests,
                m.delete_errors,
            ):
                counter.labels(lg.tp.topic, str(lg.tp.partition))

    async def before_topic_delete(
        self, topic: str, partitions: Iterable[int] | None = None
    ) -> None:
        """Delete the topic's remote data (DELETE_STARTED .. partition delete records) while
        its logs still exist: every partition's, or in cluster mode those of ``partitions``
        (the ones this broker led when the deletion reached it, so each partition's remote
        data is deleted once, by its leader). A failure is logged, not raised: the topic goes
        anyway, as in Kafka, and its metadata records say which segments were left behind."""
        if self._closed:
            return
        wanted = None if partitions is None else set(partitions)
        stops = [
            StopPartition(lg, delete_remote_log=True)
            for lg in self._logs_of(topic)
            if lg.remote_enabled and (wanted is None or lg.tp.partition in wanted)
        ]
        if not stops:
            return
        try:
            await asyncio.to_thread(self.rlm.stop_partitions, stops)
        except Exception:
            log.exception("deleting the remote data of topic %s failed", topic)

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
            if was and not lg.remote_enabled:
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
        await asyncio.to_thread(self.rlm.close)
