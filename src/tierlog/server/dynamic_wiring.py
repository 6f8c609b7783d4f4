"""Which components follow which dynamic broker keys: the ``Reconfigurable`` of each.

Every key declared ``Dynamic.LIVE`` (``config.broker_keys``) has exactly one component here
that applies it; ``tests/config`` checks that none is left without one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tierlog.config.broker import BrokerConfig
from tierlog.config.definitions import ConfigError
from tierlog.config.dynamic_broker import DEFAULT_ENTITY, live_keys
from tierlog.config.topic_keys import TOPIC_KEYS
from tierlog.log.cleaner.log_cleaner import LogCleaner
from tierlog.server.connection_limits import ConnectionLimits
from tierlog.server.dynamic_config import DynamicBrokerConfig, Reconfigurable
from tierlog.server.dynamic_config_store import FileStore, NotJoinedStore
from tierlog.server.log_cleaner import cleaner_config_for
from tierlog.server.state import BrokerState

#: Topic defaults: a topic without its own override follows these (Kafka's DynamicLogConfig).
LOG_DEFAULT_KEYS = frozenset(s for d in TOPIC_KEYS.all() for s in d.synonyms) & live_keys()
CONNECTION_KEYS = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
    }
)
CLEANER_KEYS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.max.bytes.per.second",
    }
)
COPY_QUOTA_KEY = "remote.log.manager.copy.max.bytes.per.second"
FETCH_QUOTA_KEY = "remote.log.manager.fetch.max.bytes.per.second"
REMOTE_QUOTA_KEYS = frozenset({COPY_QUOTA_KEY, FETCH_QUOTA_KEY})
LEADER_THROTTLE_KEY = "leader.replication.throttled.rate"
FOLLOWER_THROTTLE_KEY = "follower.replication.throttled.rate"
REPLICATION_THROTTLE_KEYS = frozenset({LEADER_THROTTLE_KEY, FOLLOWER_THROTTLE_KEY})

#: Every live key, by the component that applies it.
APPLIED_KEYS = (
    LOG_DEFAULT_KEYS
    | CONNECTION_KEYS
    | CLEANER_KEYS
    | REMOTE_QUOTA_KEYS
    | REPLICATION_THROTTLE_KEYS
)


def start_dynamic_config(static: BrokerConfig, state_dir: Path) -> DynamicBrokerConfig:
    """The owner of the broker's config, before any component is built. A single node takes
    its stored dynamic values now; a cluster member reads ZooKeeper's once it has joined
    (``DynamicBrokerConfig.follow``), and its components take them live."""
    if static.get("zookeeper.connect") is not None:
        return DynamicBrokerConfig(static, NotJoinedStore())
    store = FileStore(state_dir)
    dynamic = DynamicBrokerConfig(static, store)
    dynamic.start_with(store.stored(DEFAULT_ENTITY), store.stored(dynamic.entity))
    return dynamic


def register_reconfigurables(
    dynamic: DynamicBrokerConfig,
    state: BrokerState,
    limits: ConnectionLimits,
    cleaner: LogCleaner,
) -> None:
    async def config_of_state(new: BrokerConfig) -> None:
        state.config = new

    dynamic.add_reconfigurable(Reconfigurable("broker state", live_keys(), config_of_state))

    async def log_defaults(new: BrokerConfig) -> None:
        state.topics.reconfigure(new)

    dynamic.add_reconfigurable(Reconfigurable("topic defaults", LOG_DEFAULT_KEYS, log_defaults))

    async def check_limits(new: BrokerConfig) -> None:
        await asyncio.to_thread(ConnectionLimits.resolved_from, new)

    async def apply_limits(new: BrokerConfig) -> None:
        limits.update(await asyncio.to_thread(ConnectionLimits.resolved_from, new))

    dynamic.add_reconfigurable(
        Reconfigurable("connection limits", CONNECTION_KEYS, apply_limits, check_limits)
    )

    async def check_cleaner(new: BrokerConfig) -> None:
        check_cleaner_threads(int(cleaner.config.threads), int(new.get("log.cleaner.threads")))

    async def apply_cleaner(new: BrokerConfig) -> None:
        await asyncio.to_thread(cleaner.reconfigure, cleaner_config_for(new))

    dynamic.add_reconfigurable(
        Reconfigurable("log cleaner", CLEANER_KEYS, apply_cleaner, check_cleaner)
    )

    replication = state.replication
    if replication is not None:
        quotas = replication.quotas

        async def apply_throttles(new: BrokerConfig) -> None:
            quotas.leader.update_bound(int(new.get(LEADER_THROTTLE_KEY)))
            quotas.follower.update_bound(int(new.get(FOLLOWER_THROTTLE_KEY)))

        dynamic.add_reconfigurable(
            Reconfigurable("replication throttles", REPLICATION_THROTTLE_KEYS, apply_throttles)
        )

    tiering = state.tiering
    if tiering is not None:
        rlm = tiering.rlm

        async def apply_quotas(new: BrokerConfig) -> None:
            rlm.copy_quota.update_quota(float(new.get(COPY_QUOTA_KEY)))
            rlm.fetch_quota.update_quota(float(new.get(FETCH_QUOTA_KEY)))

        dynamic.add_reconfigurable(
            Reconfigurable("remote log quotas", REMOTE_QUOTA_KEYS, apply_quotas)
        )


def check_cleaner_threads(current: int, new: int) -> None:
    """Kafka's rule for a live change of ``log.cleaner.threads``: at least 1, and at most
    double or half the running count in one step."""
    key = "log.cleaner.threads"
    if new < 1:
        raise ConfigError(key, f"Log cleaner threads should be at least 1, got {new}")
    if new > current * 2:
        raise ConfigError(
            key,
            f"Log cleaner threads cannot be increased to more than double the current value "
            f"{current}",
        )
    if new < current / 2:
        raise ConfigError(
            key,
            f"Log cleaner threads cannot be reduced to less than half the current value {current}",
        )
