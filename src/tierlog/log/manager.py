"""All partition logs of the broker, spread over ``log.dirs``, with per-directory checkpoints.

Each log directory holds ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``
and, between a clean shutdown and the next start, ``.kafka_cleanshutdown``. In cluster mode,
where the replication layer sets the high watermarks, ``replication-offset-checkpoint``
keeps them (Kafka's file; startup HW = min(checkpoint, LEO)); single-node mode writes none.
The marker is removed once the directory is loaded, so any later crash is seen as unclean.
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tierlog.fsutil import atomic_write
from tierlog.log.checkpoint import (
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from tierlog.log.cleaner.config import CleanerConfig
from tierlog.log.cleaner.log_cleaner import LogCleaner
from tierlog.log.config import LogConfig
from tierlog.log.names import (
    CLEAN_SHUTDOWN_MARKER,
    DELETE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
    parse_partition_dir,
    partition_dir_name,
)
from tierlog.log.partition_log import INTERNAL_TOPICS, Clock, PartitionLog, wall_clock_ms

log = logging.getLogger(__name__)

#: Threads of the pool that runs the fsyncs ``flush.messages`` asks for (``flush_to``).
FLUSH_THREADS = 4


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        *,
        remote_storage_system_enable: bool = False,
        clock: Clock = wall_clock_ms,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.remote_storage_system_enable = remote_storage_system_enable
        self._clock = clock
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._had_clean_shutdown: dict[Path, bool] = {}
        self._hw_checkpoint: dict[TopicPartition, int] = {}
        self._flusher = ThreadPoolExecutor(FLUSH_THREADS, thread_name_prefix="log-flush")
        self.cleaner: LogCleaner | None = None

    def remote_enabled_for(self, topic: str, config: LogConfig) -> bool:
        """Spec §1.1: broker switch on, topic opted in, not compacted, not internal."""
        return (
            self.remote_storage_system_enable
            and config.remote_storage_enable
            and not config.compacted
            and topic not in INTERNAL_TOPICS
        )

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    # -- loading -------------------------------------------------------------------------

    def load(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Open every partition under every log dir, recovering after an unclean shutdown.

        ``topic_configs`` (optional) gives per-topic settings known before load; topics not
        in it use the default config until ``update_config``.
        """
        with self._lock:
            if topic_configs:
                self._topic_configs.update(topic_configs)
            for log_dir in self.log_dirs:
                log_dir.mkdir(parents=True, exist_ok=True)
                marker = log_dir / CLEAN_SHUTDOWN_MARKER
                clean = marker.exists()
                self._had_clean_shutdown[log_dir] = clean
                recovery = read_offsets_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
                starts = read_offsets_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
                self._hw_checkpoint.update(
                    read_offsets_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
                )
                for child in sorted(log_dir.iterdir()):
                    if not child.is_dir():
                        continue
                    if child.name.endswith(DELETE_DIR_SUFFIX):
                        shutil.rmtree(child, ignore_errors=True)
                        continue
                    tp = parse_partition_dir(child.name)
                    if tp is None:
                        continue
                    if tp in self._logs:
                        raise RuntimeError(f"{tp} found in two log dirs")
                    cfg = self.config_for(tp.topic)
                    self._logs[tp] = PartitionLog(
                        tp,
                        child,
                        cfg,
                        recovery_point=recovery.get(tp, 0),
                        log_start_offset=starts.get(tp),
                        had_clean_shutdown=clean,
                        remote_enabled=self.remote_enabled_for(tp.topic, cfg),
                        clock=self._clock,
                    )
                    self._log_dir_of[tp] = log_dir
                marker.unlink(missing_ok=True)
        self.flush_checkpoints()  # outside _lock: _checkpoint_lock is always taken first

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int | None:
        """The HW ``replication-offset-checkpoint`` held at load (None: no entry)."""
        return self._hw_checkpoint.get(TopicPartition(*tp))

    def had_clean_shutdown(self, log_dir: Path) -> bool:
        return self._had_clean_shutdown.get(Path(log_dir), False)

    # -- partitions ----------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(TopicPartition(*tp))

    def all_logs(self) -> list[PartitionLog]:
        with self._lock:
            return list(self._logs.values())

    def create_log(
        self, tp: TopicPartition, topic_id: uuid.UUID, config: LogConfig | None = None
    ) -> PartitionLog:
        """Create (or return the existing) log; new logs go to the least-used log dir."""
        tp = TopicPartition(*tp)
        with self._lock:
            cfg = config if config is not None else self.config_for(tp.topic)
            self._topic_configs[tp.topic] = cfg
            existing = self._logs.get(tp)
            if existing is not None:
                existing.assign_topic_id(topic_id)
                return existing
            counts = {d: 0 for d in self.log_dirs}
            for d in self._log_dir_of.values():
                counts[d] += 1
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            log_dir.mkdir(parents=True, exist_ok=True)
            part = PartitionLog(
                tp,
                log_dir / partition_dir_name(tp),
                cfg,
                topic_id=topic_id,
                remote_enabled=self.remote_enabled_for(tp.topic, cfg),
                clock=self._clock,
            )
            self._logs[tp] = part
            self._log_dir_of[tp] = log_dir
            return part

    def delete_log(self, tp: TopicPartition, *, remove: bool = True) -> Path | None:
        """Forget the log and rename its dir to ``*-delete``, as Kafka does, so a crash before
        the files are gone finishes the deletion on load. With ``remove`` the renamed dir is
        deleted before returning; without, the caller deletes it (off the event loop) and
        gets its path. None when there was no such log. A log created for the same partition
        afterwards starts in a fresh dir, whatever is left of the old one."""
        tp = TopicPartition(*tp)
        if self.cleaner is not None:
            self.cleaner.abort(tp)  # before _lock: a cleaning thread may be swapping
        with self._lock:
            part = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
            if part is None or log_dir is None:
                return None
            part.close(clean=False)
            target = log_dir / f"{partition_dir_name(tp)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            part.dir.rename(target)
            if not any(t.topic == tp.topic for t in self._logs):
                self._topic_configs.pop(tp.topic, None)
        if remove:
            shutil.rmtree(target, ignore_errors=True)
        self.flush_checkpoints()  # outside _lock: _checkpoint_lock is always taken first
        return target

    def update_config(self, topic: str, config: LogConfig) -> None:
        with self._lock:
            self._topic_configs[topic] = config
            for tp, part in self._logs.items():
                if tp.topic == topic:
                    part.update_config(config)
                    part.remote_enabled = self.remote_enabled_for(topic, config)

    # -- periodic work -----------------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> None:
        for _ in self.retention_steps(now_ms):
            pass

    def retention_steps(self, now_ms: int | None = None) -> Iterator[TopicPartition]:
        """One retention pass, a partition per step, so the broker's loop can serve other
        work between partitions (a pass over 1,000 partitions is ~100 ms of Python)."""
        for part in self.all_logs():
            try:
                part.run_retention(now_ms)
            except OSError:
                log.exception("%s: retention pass failed", part.tp)
            yield part.tp

    def flush_sealed(self) -> None:
        """Background flush of rolled segments (see ``PartitionLog.flush_sealed``)."""
        for part in self.all_logs():
            try:
                part.flush_sealed()
            except OSError:
                log.exception("%s: flushing rolled segments failed", part.tp)

    def flush_to(self, part: PartitionLog, offset: int) -> Future[None]:
        """Run ``part.flush_to(offset)`` on the flush pool; the future completes once it is
        durable (or carries the error).

        The pool has ``FLUSH_THREADS`` threads. When all are busy, a flush waits in the
        pool's queue and its caller waits with it; the event loop never blocks. The broker
        calls this from Produce, one request at a time per connection, so the queue holds at
        most one flush per connection. Queued flushes of one partition are served by the
        first that runs (``PartitionLog.flush_to``).
        """
        return self._flusher.submit(part.flush_to, offset)

    def flush_checkpoints(self) -> None:
        """Write the recovery-point and log-start checkpoints of every log dir.

        The broker calls this from a worker thread, so the fsyncs do not hold ``_lock``
        (which the loop takes to look logs up); ``_checkpoint_lock`` keeps two writers
        (the periodic one and shutdown) from interleaving, and each writes the values it
        collected inside it, so a file never goes back to older offsets.
        """
        with self._checkpoint_lock:
            self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        """Caller holds ``_checkpoint_lock`` (always taken before ``_lock``)."""
        with self._lock:
            by_dir: dict[Path, list[PartitionLog]] = {d: [] for d in self.log_dirs}
            for tp, part in self._logs.items():
                by_dir[self._log_dir_of[tp]].append(part)
            points = {
                d: (
                    {p.tp: p.recovery_point for p in parts},
                    {p.tp: p.log_start_offset for p in parts},
                    {p.tp: p.high_watermark for p in parts if p.replicated},
                )
                for d, parts in by_dir.items()
            }
        for log_dir, (recovery, starts, hws) in points.items():
            log_dir.mkdir(parents=True, exist_ok=True)
            write_offsets_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, recovery)
            write_offsets_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, starts)
            if hws:
                write_offsets_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, hws)

    # -- log cleaner --------------------------------------------------------------------------

    def logs_by_dir(self) -> list[tuple[Path, PartitionLog]]:
        with self._lock:
            return [(self._log_dir_of[tp], part) for tp, part in self._logs.items()]

    def start_cleaner(self, config: CleanerConfig) -> LogCleaner:
        """Start the log cleaner's threads (none with ``log.cleaner.enable=false``); the
        manager owns it and stops it first on ``shutdown``."""
        if self.cleaner is None:
            self.cleaner = LogCleaner(config, self.logs_by_dir, clock=self._clock)
        self.cleaner.start()
        return self.cleaner

    def shutdown(self) -> None:
        """Stop the log cleaner, finish queued flushes, flush every log, write checkpoints,
        then the clean-shutdown markers."""
        if self.cleaner is not None:
            self.cleaner.close()
        self._flusher.shutdown(wait=True)
        with self._checkpoint_lock, self._lock:
            for part in self._logs.values():
                part.close(clean=True)
            self._write_checkpoints()
            for log_dir in self.log_dirs:
                atomic_write(log_dir / CLEAN_SHUTDOWN_MARKER, b"")
            self._logs.clear()
            self._log_dir_of.clear()
