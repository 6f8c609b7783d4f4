"""Typed settings of the RemoteLogManager, read once from the broker configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["RemoteLogManagerConfig"]


class _HasValues(Protocol):
    @property
    def values(self) -> Any: ...


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """Kafka's defaults; each field names its broker key."""

    broker_id: int = 0
    task_interval_ms: int = 30_000  # remote.log.manager.task.interval.ms
    thread_pool_size: int = 10  # remote.log.manager.thread.pool.size (follower pool)
    copier_thread_pool_size: int = -1  # -1 = thread_pool_size
    expiration_thread_pool_size: int = -1  # -1 = thread_pool_size
    reader_threads: int = 10  # remote.log.reader.threads
    reader_max_pending_tasks: int = 100  # remote.log.reader.max.pending.tasks
    custom_metadata_max_bytes: int = 128  # remote.log.metadata.custom.metadata.max.bytes
    index_cache_total_size_bytes: int = 1 << 30  # remote.log.index.file.cache.total.size.bytes
    index_cache_ttl_ms: int = 900_000  # remote.log.index.file.cache.ttl.ms (internal)
    copy_max_bytes_per_second: float = float(2**63 - 1)
    copy_quota_window_num: int = 11
    copy_quota_window_size_seconds: int = 1
    fetch_max_bytes_per_second: float = float(2**63 - 1)
    fetch_quota_window_num: int = 11
    fetch_quota_window_size_seconds: int = 1
    remote_fetch_max_wait_ms: int = 500  # remote.fetch.max.wait.ms
    list_offsets_timeout_ms: int = 30_000  # remote.list.offsets.request.timeout.ms
    copy_lag_ms: int = 0  # remote.log.copy.lag.ms (0 = upload as soon as sealed)
    copy_lag_bytes: int = 0  # remote.log.copy.lag.bytes
    retry_backoff_ms: int = 500  # remote.log.manager.task.retry.backoff.ms
    retry_backoff_max_ms: int = 30_000  # remote.log.manager.task.retry.backoff.max.ms
    retry_jitter: float = 0.2  # remote.log.manager.task.retry.jitter
    initial_task_delay_ms: int = 0
    """Delay of a new task's first run (Kafka: 0). Tests raise it and drive runs with
    ``RemoteLogManager.run_now`` so each run is deterministic."""

    @property
    def copier_pool_size(self) -> int:
        n = self.copier_thread_pool_size
        return self.thread_pool_size if n == -1 else n

    @property
    def expiration_pool_size(self) -> int:
        n = self.expiration_thread_pool_size
        return self.thread_pool_size if n == -1 else n

    @classmethod
    def from_broker_config(cls, broker: _HasValues) -> RemoteLogManagerConfig:
        v = broker.values

        def get(key: str, default: Any) -> Any:
            value = v.get(key) if hasattr(v, "get") else None
            return default if value is None else value

        d = cls()
        return cls(
            broker_id=int(get("node.id", get("broker.id", d.broker_id))),
            task_interval_ms=int(get("remote.log.manager.task.interval.ms", d.task_interval_ms)),
            thread_pool_size=int(get("remote.log.manager.thread.pool.size", d.thread_pool_size)),
            copier_thread_pool_size=int(
                get("remote.log.manager.copier.thread.pool.size", d.copier_thread_pool_size)
            ),
            expiration_thread_pool_size=int(
                get("remote.log.manager.expiration.thread.pool.size", -1)
            ),
            reader_threads=int(get("remote.log.reader.threads", d.reader_threads)),
            reader_max_pending_tasks=int(
                get("remote.log.reader.max.pending.tasks", d.reader_max_pending_tasks)
            ),
            custom_metadata_max_bytes=int(
                get("remote.log.metadata.custom.metadata.max.bytes", d.custom_metadata_max_bytes)
            ),
            index_cache_total_size_bytes=int(
                get("remote.log.index.file.cache.total.size.bytes", d.index_cache_total_size_bytes)
            ),
            index_cache_ttl_ms=int(get("remote.log.index.file.cache.ttl.ms", d.index_cache_ttl_ms)),
            copy_max_bytes_per_second=float(
                get("remote.log.manager.copy.max.bytes.per.second", d.copy_max_bytes_per_second)
            ),
            copy_quota_window_num=int(get("remote.log.manager.copy.quota.window.num", 11)),
            copy_quota_window_size_seconds=int(
                get("remote.log.manager.copy.quota.window.size.seconds", 1)
            ),
            fetch_max_bytes_per_second=float(
                get("remote.log.manager.fetch.max.bytes.per.second", d.fetch_max_bytes_per_second)
            ),
            fetch_quota_window_num=int(get("remote.log.manager.fetch.quota.window.num", 11)),
            fetch_quota_window_size_seconds=int(
                get("remote.log.manager.fetch.quota.window.size.seconds", 1)
            ),
            remote_fetch_max_wait_ms=int(get("remote.fetch.max.wait.ms", 500)),
            list_offsets_timeout_ms=int(get("remote.list.offsets.request.timeout.ms", 30_000)),
            copy_lag_ms=int(get("remote.log.copy.lag.ms", 0)),
            copy_lag_bytes=int(get("remote.log.copy.lag.bytes", 0)),
            retry_backoff_ms=int(
                get("remote.log.manager.task.retry.backoff.ms", d.retry_backoff_ms)
            ),
            retry_backoff_max_ms=int(
                get("remote.log.manager.task.retry.backoff.max.ms", d.retry_backoff_max_ms)
            ),
            retry_jitter=float(get("remote.log.manager.task.retry.jitter", d.retry_jitter)),
        )
