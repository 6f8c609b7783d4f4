"""The broker process: assembles the parts, owns their lifecycles and background tasks.

Start order: log recovery, topics, tiered storage (its metadata topic must be readable
before any tiered partition is served), group coordinator, codec warm-up, metrics endpoint,
then the listener is bound, the broker joins its cluster (if any), and only then does the
listener serve (so a client never reaches a half-initialised broker, nor one that has not read
the cluster's topics yet), then the transaction coordinator (its markers go to this listener;
its APIs answer COORDINATOR_LOAD_IN_PROGRESS until it is loaded). Shutdown runs in
reverse: stop accepting, let waiting fetches answer, finish in-flight requests (bounded wait),
stop the coordinator and the remote log manager, then flush logs and write checkpoints and the
clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping

from tierlog.config.broker import BrokerConfig
from tierlog.log import LogManager
from tierlog.log.cleaner.log_cleaner import LogCleaner
from tierlog.protocol.codec import preload_steps
from tierlog.protocol.versions import ADVERTISED
from tierlog.replication.manager import replication_for
from tierlog.server import heap_profile, native_memory
from tierlog.server.cluster_meta import load_or_create_cluster_id
from tierlog.server.cluster_mode import ClusterMode
from tierlog.server.connection import KafkaConnection
from tierlog.server.connection_limits import ConnectionLimits
from tierlog.server.dynamic_config import DynamicBrokerConfig
from tierlog.server.dynamic_config_store import ZooKeeperStore
from tierlog.server.dynamic_wiring import register_reconfigurables, start_dynamic_config
from tierlog.server.fetch_metrics import FetchCollector
from tierlog.server.fetch_sessions import (
    MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    FetchSessionCache,
)
from tierlog.server.groups_wiring import build_group_coordinator
from tierlog.server.handlers import register_all
from tierlog.server.log_cleaner import CleanerCollector, cleaner_config_for
from tierlog.server.log_configs import log_config_for
from tierlog.server.metrics import BrokerMetrics, PartitionStats
from tierlog.server.producer_ids import ProducerIdAllocator
from tierlog.server.purgatory import FetchPurgatory
from tierlog.server.quotas.manager import ClientQuotas, QuotaCounters
from tierlog.server.quotas.store import LocalQuotaStore, ZooKeeperQuotaStore
from tierlog.server.replication_quota_metrics import ReplicationQuotaCollector
from tierlog.server.reply_writer import ReplyWriter
from tierlog.server.request_memory import QueuedRequestBytes
from tierlog.server.router import Router
from tierlog.server.state import BrokerState
from tierlog.server.tiering import Tiering
from tierlog.server.topics import TopicManager
from tierlog.server.txn_wiring import close_transactions, start_transactions

log = logging.getLogger(__name__)

READY_PREFIX = "tierlog ready:"
SHUTDOWN_GRACE_S = 10.0
RETENTION_STEP = 16  # partitions per retention slice between yields to the loop
#: Bounds of the idle-connection sweep's period (a quarter of connections.max.idle.ms):
#: at most 30 s late with Kafka's 10 min, and not a busy loop with a tiny setting.
IDLE_SWEEP_MIN_MS = 100
IDLE_SWEEP_MAX_MS = 30_000


async def _apply_topic_config(
    topics: TopicManager, tiering: Tiering, name: str, config: Mapping[str, str]
) -> None:
    """A topic's overrides from ZooKeeper: the local topic store takes them, then tiering
    reacts as it does to AlterConfigs (copy off or on, tiering on, or off with deletion).
    Overrides the topic has already (a broker's start) change nothing."""
    if topics.has_overrides(name, config):
        return
    before = tiering.config_snapshot(name)
    topics.replace_configs(name, config)
    await tiering.after_config_change(name, before)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.metrics = BrokerMetrics()
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self._stopping = False
        self.state: BrokerState | None = None
        self.bound: tuple[str, int] | None = None
        self.metrics_port: int | None = None
        self.cluster: ClusterMode | None = None

    async def _listen(
        self, cfg: BrokerConfig, router: Router, limits: ConnectionLimits
    ) -> tuple[str, int]:
        """Bind the listener, not yet serving (``start``: once the broker has joined its
        cluster); its connections share the reply writer, the connection limits and the
        count of queued request bytes (``queued.max.request.bytes``)."""
        listener = cfg.listeners[0]
        host = listener.host or "0.0.0.0"
        writer = ReplyWriter(self.metrics.records_sendfile, self.metrics.records_copied)
        queued = QueuedRequestBytes(int(cfg.get("queued.max.request.bytes")))
        self.metrics.queued_request_bytes.set_function(lambda: queued.used)
        self._server = await asyncio.get_running_loop().create_server(
            lambda: KafkaConnection(
                router.handle,
                cfg.socket_request_max_bytes,
                self._connections,
                writer,
                limits,
                queued,
            ),
            host,
            listener.port,
            reuse_address=True,
            backlog=int(cfg.get("socket.listen.backlog.size")),
            start_serving=False,
        )
        sock = self._server.sockets[0]
        self.bound = (host, int(sock.getsockname()[1]))
        return self.bound

    # ---- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        log_dirs = self.config.log_dirs
        for d in log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        state_dir = log_dirs[0]
        dynamic = start_dynamic_config(self.config, state_dir)
        self.config = cfg = dynamic.current
        # Resolves the override host names: a bad one stops the start before any recovery.
        limits = ConnectionLimits.from_config(
            cfg, self.metrics.connections_refused, self.metrics.connection_accept_throttle_seconds
        )
        cluster_id = load_or_create_cluster_id(state_dir, cfg.node_id)
        t0 = time.monotonic()
        logs = LogManager(
            log_dirs,
            log_config_for({}, cfg),
            remote_storage_system_enable=cfg.remote_storage_system_enabled,
        )
        topics = TopicManager(cfg, logs, state_dir)
        logs.load(topics.load())
        topics.attach_logs()
        log.info("loaded %d logs in %.2fs", len(logs.all_logs()), time.monotonic() - t0)
        purgatory = FetchPurgatory()
        producer_ids = ProducerIdAllocator(state_dir)
        tiering: Tiering | None = None
        if cfg.remote_storage_system_enabled:
            tiering = await Tiering.start(cfg, topics, logs, purgatory, self.metrics.registry)
        self.metrics.add_partition_source(self._partition_stats)
        cleaner = logs.start_cleaner(cleaner_config_for(cfg))
        self.metrics.registry.register(CleanerCollector(cleaner.health))
        fetch_sessions = FetchSessionCache(
            cfg.max_incremental_fetch_session_cache_slots, MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
        )
        self.metrics.registry.register(FetchCollector(fetch_sessions, purgatory))
        metrics_addr = cfg.metrics_listener
        if metrics_addr is not None:
            self.metrics_port = self.metrics.serve(*metrics_addr)

        quotas = ClientQuotas(
            int(cfg.get("quota.window.num")),
            int(cfg.get("quota.window.size.seconds")),
            QuotaCounters(self.metrics.quota_throttle_seconds, self.metrics.quota_throttled),
            (
                int(cfg.get("controller.quota.window.num")),
                int(cfg.get("controller.quota.window.size.seconds")),
            ),
        )
        limits.creation_rate = quotas.connection_throttle_ms
        local_quotas: LocalQuotaStore | None = None
        if not cfg.get("zookeeper.connect"):
            local_quotas = LocalQuotaStore(quotas, state_dir)
            await local_quotas.start()

        router = Router(self.metrics, quotas)
        bound = await self._listen(cfg, router, limits)
        advertised = self._advertised(bound[1])
        replication = replication_for(cfg, topics, logs, purgatory.notify)
        state = BrokerState(
            config=cfg,
            cluster_id=cluster_id,
            topics=topics,
            logs=logs,
            purgatory=purgatory,
            producer_ids=producer_ids,
            groups=await build_group_coordinator(cfg, topics, advertised, replication),
            advertised=advertised,
            fetch_sessions=fetch_sessions,
            tiering=tiering,
            replication=replication,
            quotas=quotas,
            quota_store=local_quotas,
            dynamic_config=dynamic,
        )
        self.state = state
        self._follow_dynamic_config(dynamic, state, limits, cleaner)
        register_all(router, state)
        await self._join_cluster(state)
        # Kafka's enableRequestProcessing: the port is bound (it is what the broker
        # registers), but a client connecting while the broker joins waits in the backlog
        # instead of being answered from a view not yet read (a Metadata naming none of the
        # topic's partitions, which librdkafka takes for a partition count of 0)
        assert self._server is not None
        await self._server.start_serving()
        await start_transactions(state)
        self._start_background_tasks(logs)
        log.info(
            "tierlog broker %d serving %s:%d (cluster %s)",
            cfg.node_id,
            *bound,
            cluster_id,
        )

    def _follow_dynamic_config(
        self,
        dynamic: DynamicBrokerConfig,
        state: BrokerState,
        limits: ConnectionLimits,
        cleaner: LogCleaner,
    ) -> None:
        """The components take each dynamic change from now on; the replication throttles
        (cluster mode) are exported as metrics."""
        register_reconfigurables(dynamic, state, limits, cleaner)
        if state.replication is not None:
            self.metrics.registry.register(ReplicationQuotaCollector(state.replication.quotas))

    async def _join_cluster(self, state: BrokerState) -> None:
        """Cluster mode: register in ZooKeeper, then let replication (and the remote log
        tasks through it) follow the partition states there."""
        self.cluster = await ClusterMode.start(self.config, state.advertised)
        if self.cluster is None:
            return
        state.quota_store = ZooKeeperQuotaStore(state.quotas, self.cluster.node)
        await state.quota_store.start()
        if state.replication is None:
            return
        if state.dynamic_config is not None:
            await state.dynamic_config.follow(ZooKeeperStore(self.cluster.node.member.zk.kazoo))
        if state.tiering is not None:
            state.replication.on_partitions_deleted = state.tiering.before_topic_delete
            state.replication.topic_configs.apply = functools.partial(
                _apply_topic_config, state.topics, state.tiering
            )
        state.cluster_id = await state.replication.start(self.cluster.node, state.cluster_id)
        if state.tiering is not None:
            state.tiering.attach_replication(state.replication)

    def _start_background_tasks(self, logs: LogManager) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._warm_codec()))
        self._tasks.append(
            loop.create_task(self._every(cfg.retention_check_interval_ms, self._retention))
        )
        self._tasks.append(
            loop.create_task(
                self._every(
                    cfg.checkpoint_interval_ms, lambda: asyncio.to_thread(logs.flush_checkpoints)
                )
            )
        )
        self._tasks.append(loop.create_task(self._flush_rolled_segments(logs)))
        self._tasks.append(loop.create_task(self._trim_native_memory()))
        if cfg.connections_max_idle_ms >= 0:
            self._tasks.append(
                loop.create_task(
                    self._every(
                        idle_sweep_interval_ms(cfg.connections_max_idle_ms),
                        self._close_idle_connections,
                    )
                )
            )
        heap_dir = heap_profile.requested()
        if heap_dir is not None:
            self._tasks.append(loop.create_task(heap_profile.run(heap_dir)))

    def _advertised(self, bound_port: int) -> tuple[str, int]:
        """The first advertised listener, or the bound one (with its kernel-picked port)."""
        cfg = self.config
        if cfg.values["advertised.listeners"]:
            a = cfg.advertised_listeners[0]
            return a.host, a.port or bound_port
        listener = cfg.listeners[0]
        return (
            listener.host if listener.host not in ("", "0.0.0.0") else "127.0.0.1",
            bound_port,
        )

    def ready_line(self) -> str:
        assert self.bound is not None and self.state is not None
        host, port = self.state.advertised
        metrics = (
            f"http://{self.config.metrics_listener[0]}:{self.metrics_port}"
            if (self.config.metrics_listener and self.metrics_port)
            else "-"
        )
        return f"{READY_PREFIX} bootstrap={host}:{port} metrics={metrics} pid={os.getpid()}"

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def request_shutdown(self) -> None:
        if not self._stopping:
            self._stopping = True
            asyncio.get_running_loop().create_task(self.shutdown())

    @property
    def open_connections(self) -> int:
        """Client connections this broker holds now."""
        return len(self._connections)

    async def shutdown(self) -> None:
        self._stopping = True
        state = self.state
        log.info("shutting down")
        grace = self._controlled_shutdown_s()
        if state is not None and state.replication is not None and grace > 0:
            await state.replication.controlled_shutdown(grace)
        if self._server is not None:
            self._server.close()
        if state is not None:
            state.shutting_down = True
            state.purgatory.notify_all()
            if state.replication is not None:
                state.replication.begin_shutdown()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while any(c.busy for c in self._connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for c in list(self._connections):
            c.close()
        if state is not None:
            await state.marker_writes.close(cancel=True)
        if state is not None and state.dynamic_config is not None:
            state.dynamic_config.close()
        if state is not None and state.replication is not None:
            await state.replication.close()
        if state is not None and state.quota_store is not None:
            await state.quota_store.close()
        if self.cluster is not None:
            await self.cluster.close()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if state is not None:
            await close_transactions(state)
            await state.groups.close()
            state.fetch_sessions.close()
            if state.tiering is not None:
                await state.tiering.close()
            state.logs.shutdown()
        self.metrics.stop()
        log.info("shutdown complete")
        self._stopped.set()

    def _controlled_shutdown_s(self) -> float:
        """How long a controlled shutdown may take: Kafka's retries times their back-off
        (0 when ``controlled.shutdown.enable`` is off)."""
        cfg = self.config
        if not cfg.get("controlled.shutdown.enable"):
            return 0.0
        retries = int(cfg.get("controlled.shutdown.max.retries"))
        return max(retries, 1) * int(cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000

    # ---- background work ----------------------------------------------------------------
    async def _every(self, interval_ms: int, fn: Callable[[], Awaitable[None]]) -> None:
        interval = max(interval_ms, 1) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def _close_idle_connections(self) -> None:
        """Abort every connection without I/O progress for ``connections.max.idle.ms``
        (``KafkaConnection.idle_for``). One sweep for all connections instead of a timer
        each, so a connection is closed up to one sweep period (``idle_sweep_interval_ms``)
        after its idle time ran out. Aborted, not closed: a graceful close would wait for
        the very client that stopped reading, and the response it pins is what closing
        frees."""
        max_idle_ms = self.config.connections_max_idle_ms
        now = asyncio.get_running_loop().time()
        for c in list(self._connections):
            idle_s = c.idle_for(now)
            if idle_s * 1000 <= max_idle_ms:
                continue
            log.info(
                "closing connection from %s: idle for %.1fs (connections.max.idle.ms=%d)",
                c.peer,
                idle_s,
                max_idle_ms,
            )
            self.metrics.idle_connections_closed.inc()
            c.abort()

    async def _flush_rolled_segments(self, logs: LogManager) -> None:
        """fsync rolled segments off the loop, every second (Kafka does it on its scheduler
        right after each roll); the recovery point follows each flush."""
        while True:
            await asyncio.sleep(1.0)
            try:
                await asyncio.to_thread(logs.flush_sealed)
            except Exception:
                log.exception("background flush of rolled segments failed")

    async def _trim_native_memory(self) -> None:
        while True:
            await asyncio.sleep(native_memory.TRIM_INTERVAL_S)
            await asyncio.to_thread(native_memory.trim)

    async def _warm_codec(self) -> None:
        for _ in preload_steps(ADVERTISED):
            await asyncio.sleep(0)
        log.debug("codec schemas preloaded")

    async def _retention(self) -> None:
        """One retention pass, yielding to the loop every few partitions: it stays on the
        loop (reads there need no guard against a concurrent segment close), and a pass
        over 1,000 partitions (~100 ms of Python) does not hold every request that long."""
        assert self.state is not None
        for i, _ in enumerate(self.state.logs.retention_steps(int(time.time() * 1000))):
            if i % RETENTION_STEP == RETENTION_STEP - 1:
                await asyncio.sleep(0)

    def _partition_stats(self) -> Iterator[PartitionStats]:
        state = self.state
        if state is None:
            return
        for t in state.topics.all():
            for p in range(t.partitions):
                plog = state.topics.get_log(t.name, p)
                if plog is None:
                    continue
                yield PartitionStats(
                    t.name, p, int(plog.size), int(plog.log_start_offset), int(plog.log_end_offset)
                )


def idle_sweep_interval_ms(max_idle_ms: int) -> int:
    """How often idle connections are looked for: a quarter of the idle time, within
    ``IDLE_SWEEP_MIN_MS`` .. ``IDLE_SWEEP_MAX_MS``."""
    return min(max(max_idle_ms // 4, IDLE_SWEEP_MIN_MS), IDLE_SWEEP_MAX_MS)


async def run_broker(config: BrokerConfig) -> None:
    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_shutdown)
    print(broker.ready_line(), flush=True)
    await broker.wait_stopped()


def run(config: BrokerConfig) -> None:
    """Run until SIGTERM/SIGINT, on uvloop when it is installed."""
    native_memory.limit_arenas()  # before any pool starts a thread
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a declared dependency
        asyncio.run(run_broker(config))
        return
    if sys.platform != "win32":
        uvloop.run(run_broker(config))
