"""Typed settings of the RemoteLogManager, read once from the broker configuration.

A field set by a broker key names that key, and its default is the key's default in
``tierlog.config`` (the one key table), so the two cannot drift apart. ``from_broker_config``
reads those keys from the typed ``BrokerConfig``, whose values hold every key (explicit or
default).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from tierlog.config import BrokerConfig
from tierlog.config.broker_keys import BROKER_KEYS

__all__ = ["RemoteLogManagerConfig"]

_KEY = "broker_key"
_AS_FLOAT = "as_float"


def _key(name: str, *, as_float: bool = False) -> Any:
    """A field set by broker key ``name``, defaulting to that key's default."""
    default = BROKER_KEYS[name].default
    return field(
        default=float(default) if as_float else default,
        metadata={_KEY: name, _AS_FLOAT: as_float},
    )


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """The manager's settings; each key-backed field names its broker key."""

    broker_id: int = _key("node.id")
    task_interval_ms: int = _key("remote.log.manager.task.interval.ms")
    thread_pool_size: int = _key("remote.log.manager.thread.pool.size")
    """The follower pool, and the copier and expiration pools when those are -1."""
    copier_thread_pool_size: int = _key("remote.log.manager.copier.thread.pool.size")
    expiration_thread_pool_size: int = _key("remote.log.manager.expiration.thread.pool.size")
    reader_threads: int = _key("remote.log.reader.threads")
    reader_max_pending_tasks: int = _key("remote.log.reader.max.pending.tasks")
    custom_metadata_max_bytes: int = _key("remote.log.metadata.custom.metadata.max.bytes")
    index_cache_total_size_bytes: int = _key("remote.log.index.file.cache.total.size.bytes")
    index_cache_ttl_ms: int = _key("remote.log.index.file.cache.ttl.ms")
    copy_max_bytes_per_second: float = _key(
        "remote.log.manager.copy.max.bytes.per.second", as_float=True
    )
    copy_quota_window_num: int = _key("remote.log.manager.copy.quota.window.num")
    copy_quota_window_size_seconds: int = _key("remote.log.manager.copy.quota.window.size.seconds")
    fetch_max_bytes_per_second: float = _key(
        "remote.log.manager.fetch.max.bytes.per.second", as_float=True
    )
    fetch_quota_window_num: int = _key("remote.log.manager.fetch.quota.window.num")
    fetch_quota_window_size_seconds: int = _key(
        "remote.log.manager.fetch.quota.window.size.seconds"
    )
    remote_fetch_max_wait_ms: int = _key("remote.fetch.max.wait.ms")
    remote_fetch_partial_wait_ms: int = _key("remote.fetch.partial.wait.ms")
    """How long a Fetch whose remote reads have some records still waits for the rest."""
    list_offsets_timeout_ms: int = _key("remote.list.offsets.request.timeout.ms")
    copy_lag_ms: int = _key("log.remote.copy.lag.ms")
    """0 uploads a segment as soon as it is sealed."""
    copy_lag_bytes: int = _key("log.remote.copy.lag.bytes")
    retry_backoff_ms: int = _key("remote.log.manager.task.retry.backoff.ms")
    retry_backoff_max_ms: int = _key("remote.log.manager.task.retry.backoff.max.ms")
    retry_jitter: float = _key("remote.log.manager.task.retry.jitter")
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
    def from_broker_config(cls, broker: BrokerConfig) -> RemoteLogManagerConfig:
        """Every key-backed field from ``broker``; the others keep their defaults."""
        settings: dict[str, Any] = {}
        for f in fields(cls):
            key = f.metadata.get(_KEY)
            if key is not None:
                value = broker.get(key)
                settings[f.name] = float(value) if f.metadata[_AS_FLOAT] else value
        return cls(**settings)
