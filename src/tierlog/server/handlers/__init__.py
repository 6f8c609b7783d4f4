"""Request handlers, one module per API family, wired to a ``Router`` by ``register_all``."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.codec import Request
from tierlog.server.connection import ConnectionInfo
from tierlog.server.handlers import (
    admin_topics,
    api_versions,
    client_quotas,
    cluster,
    cluster_admin,
    cluster_metadata,
    cluster_partitions,
    cluster_topics,
    configs,
    delete_records,
    fetch,
    groups,
    leader_epochs,
    list_offsets,
    log_dirs,
    metadata,
    produce,
    producers,
    scram_credentials,
    txn,
    txn_markers,
)
from tierlog.server.quotas.entities import QuotaKind
from tierlog.server.quotas.mutation import MutationQuota
from tierlog.server.router import Router
from tierlog.server.state import BrokerState

_Simple = Callable[[BrokerState, Request], Awaitable[Any]]

_SIMPLE: dict[ApiKey, _Simple] = {
    ApiKey.LIST_OFFSETS: list_offsets.handle_list_offsets,
    ApiKey.METADATA: metadata.handle_metadata,
    ApiKey.API_VERSIONS: api_versions.handle_api_versions,
    ApiKey.DELETE_RECORDS: delete_records.handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: cluster.handle_init_producer_id,
    ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    ApiKey.ADD_PARTITIONS_TO_TXN: txn.add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: txn.add_offsets_to_txn,
    ApiKey.END_TXN: txn.end_txn,
    ApiKey.DESCRIBE_TRANSACTIONS: txn.describe_transactions,
    ApiKey.LIST_TRANSACTIONS: txn.list_transactions,
    ApiKey.TXN_OFFSET_COMMIT: txn.txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: txn_markers.handle_write_txn_markers,
    ApiKey.DESCRIBE_PRODUCERS: producers.handle_describe_producers,
    ApiKey.DESCRIBE_LOG_DIRS: log_dirs.handle_describe_log_dirs,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.handle_alter_client_quotas,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        scram_credentials.handle_describe_user_scram_credentials
    ),
}

_GROUPS: dict[ApiKey, _Simple] = {
    ApiKey.OFFSET_COMMIT: groups.handle_offset_commit,
    ApiKey.OFFSET_FETCH: groups.handle_offset_fetch,
    ApiKey.FIND_COORDINATOR: groups.handle_find_coordinator,
    ApiKey.HEARTBEAT: groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    ApiKey.SYNC_GROUP: groups.handle_sync_group,
    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    ApiKey.LIST_GROUPS: groups.handle_list_groups,
    ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
    ApiKey.OFFSET_DELETE: groups.handle_offset_delete,
}


_WithConnection = Callable[[BrokerState, Request, ConnectionInfo], Awaitable[Any]]

_Mutating = Callable[[BrokerState, Request, MutationQuota], Awaitable[Any]]

#: The APIs that create or delete partitions, held to KIP-599's ``controller_mutation_rate``:
#: the version from which a throttled client gets THROTTLING_QUOTA_EXCEEDED (strict), and the
#: handlers of a single node and of a cluster.
_MUTATING: dict[ApiKey, tuple[int, _Mutating, _Mutating]] = {
    ApiKey.CREATE_TOPICS: (
        6,
        admin_topics.handle_create_topics,
        cluster_topics.handle_create_topics,
    ),
    ApiKey.CREATE_PARTITIONS: (
        3,
        admin_topics.handle_create_partitions,
        cluster_partitions.handle_create_partitions,
    ),
    ApiKey.DELETE_TOPICS: (
        5,
        admin_topics.handle_delete_topics,
        cluster_admin.handle_delete_topics,
    ),
}


def _mutating(
    state: BrokerState, fn: _Mutating, strict_since: int
) -> Callable[[Request, ConnectionInfo], Awaitable[Any]]:
    """The handler with its client's mutation quota; the response's throttle time (and the
    connection's mute) is what the quota says once the handler is done (Kafka's
    ``sendResponseMaybeThrottleWithControllerQuota``)."""

    async def handler(req: Request, conn: ConnectionInfo) -> Any:
        quota = state.quotas.mutation_quota(
            conn.principal,
            conn.client_id,
            req.header.api_version >= strict_since,
            time.monotonic() * 1000,
        )
        result = await fn(state, req, quota)
        throttle = quota.throttle_ms(time.monotonic() * 1000)
        if throttle > conn.throttle_ms:
            state.quotas.throttled(QuotaKind.CONTROLLER_MUTATION, throttle)
            conn.throttle(throttle)
        return result

    return handler


#: Handlers that need the connection: its principal and client quotas' throttle.
_WITH_CONNECTION: dict[ApiKey, _WithConnection] = {
    ApiKey.PRODUCE: produce.handle_produce,
    ApiKey.FETCH: fetch.handle_fetch,
}


def _bind(state: BrokerState, fn: _Simple) -> Callable[[Request, ConnectionInfo], Awaitable[Any]]:
    async def handler(req: Request, conn: ConnectionInfo) -> Any:
        return await fn(state, req)

    return handler


#: Cluster mode's own handlers: Metadata and DescribeCluster from the cluster view,
#: CreateTopics, CreatePartitions, DeleteTopics, ElectLeaders and the reassignment APIs
#: through the controller, and OffsetForLeaderEpoch (cluster mode only).
_CLUSTER: dict[ApiKey, _Simple] = {
    ApiKey.METADATA: cluster_metadata.handle_metadata,
    ApiKey.DESCRIBE_CLUSTER: cluster_metadata.handle_describe_cluster,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: leader_epochs.handle_offset_for_leader_epoch,
    ApiKey.ELECT_LEADERS: cluster_admin.handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: cluster_admin.handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: cluster_admin.handle_list_partition_reassignments,
}


def register_all(router: Router, state: BrokerState) -> None:
    simple = _SIMPLE | _CLUSTER if state.replication is not None else _SIMPLE
    for key, fn in simple.items():
        router.register(key, _bind(state, fn))
    for key, fn in _GROUPS.items():
        router.register(key, _bind(state, fn))
    for key, with_conn in _WITH_CONNECTION.items():
        router.register(key, functools.partial(with_conn, state))
    cluster_mode = state.replication is not None
    for key, (strict_since, single, clustered) in _MUTATING.items():
        router.register(key, _mutating(state, clustered if cluster_mode else single, strict_since))

    async def join(req: Request, conn: ConnectionInfo) -> Any:
        host = conn.peer.rsplit(":", 1)[0]
        return await groups.handle_join_group(state, req, req.header.client_id or "", host)

    router.register(ApiKey.JOIN_GROUP, join)
