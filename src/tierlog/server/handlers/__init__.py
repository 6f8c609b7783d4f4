"""Request handlers, one module per API family, wired to a ``Router`` by ``register_all``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tierlog.protocol.codec import Request
from tierlog.server.connection import ConnectionInfo
from tierlog.server.handlers import (
    admin_topics,
    api_versions,
    cluster,
    configs,
    delete_records,
    fetch,
    groups,
    list_offsets,
    metadata,
    produce,
)
from tierlog.server.router import Router
from tierlog.server.state import BrokerState

_Simple = Callable[[BrokerState, Request], Awaitable[Any]]

_SIMPLE: dict[int, _Simple] = {
    0: produce.handle_produce,
    1: fetch.handle_fetch,
    2: list_offsets.handle_list_offsets,
    3: metadata.handle_metadata,
    18: api_versions.handle_api_versions,
    19: admin_topics.handle_create_topics,
    20: admin_topics.handle_delete_topics,
    21: delete_records.handle_delete_records,
    22: cluster.handle_init_producer_id,
    32: configs.handle_describe_configs,
    33: configs.handle_alter_configs,
    37: admin_topics.handle_create_partitions,
    44: configs.handle_incremental_alter_configs,
    60: cluster.handle_describe_cluster,
}

_GROUPS: dict[int, _Simple] = {
    8: groups.handle_offset_commit,
    9: groups.handle_offset_fetch,
    10: groups.handle_find_coordinator,
    12: groups.handle_heartbeat,
    13: groups.handle_leave_group,
    14: groups.handle_sync_group,
    15: groups.handle_describe_groups,
    16: groups.handle_list_groups,
    42: groups.handle_delete_groups,
}


def _bind(state: BrokerState, fn: _Simple) -> Callable[[Request, ConnectionInfo], Awaitable[Any]]:
    async def handler(req: Request, conn: ConnectionInfo) -> Any:
        return await fn(state, req)

    return handler


def register_all(router: Router, state: BrokerState) -> None:
    for key, fn in _SIMPLE.items():
        router.register(key, _bind(state, fn))
    for key, fn in _GROUPS.items():
        router.register(key, _bind(state, fn))

    async def join(req: Request, conn: ConnectionInfo) -> Any:
        host = conn.peer.rsplit(":", 1)[0]
        return await groups.handle_join_group(state, req, req.header.client_id or "", host)

    router.register(11, join)
