"""Consumer-group APIs: decode the kio request, call ``GroupCoordinator``, encode the answer.

The coordinator speaks version-free plain data (``tierlog.server.group.model``); every
version difference is absorbed here: v0 JoinGroup's missing rebalance timeout, single-group
OffsetFetch (< v8), single-member LeaveGroup (< v3), single-key FindCoordinator (< v4).
"""

from __future__ import annotations

import datetime
from typing import Any

from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group import model as gm
from tierlog.server.handlers.authorized_operations import (
    NOT_REQUESTED,
    ResourceType,
    authorized_operations,
)
from tierlog.server.state import BrokerState


def _ms(value: Any, default: int = -1) -> int:
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _resp(req: Request, **kw: Any) -> Any:
    return mk(response_schema(req.header.api_key, req.header.api_version), throttle_time=0, **kw)


async def handle_find_coordinator(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    keys = tuple(body.coordinator_keys or ()) if version >= 4 else (body.key,)
    key_type = int(getattr(body, "key_type", 0))
    txn = state.txn
    if key_type == gm.CoordinatorKeyType.TRANSACTION and txn is not None and txn.placement:
        placement = txn.placement
        found = [await placement.coordinator_for(k, txn.partition_for(k)) for k in keys]
        result = gm.FindCoordinatorResponse(coordinators=tuple(found))
    else:
        result = await state.groups.find_coordinator(
            gm.FindCoordinatorRequest(key_type=key_type, keys=keys)
        )
    entries = [
        {
            "key": c.key,
            "node_id": c.node_id,
            "host": c.host,
            "port": c.port,
            "error_code": c.error_code,
            "error_message": c.error_message,
        }
        for c in result.coordinators
    ]
    if version >= 4:
        return _resp(req, coordinators=entries)
    if not entries:
        return _resp(req, error_code=ErrorCode.INVALID_REQUEST)
    first = entries[0]
    return _resp(req, **{k: v for k, v in first.items() if k != "key"})


async def handle_join_group(state: BrokerState, req: Request, client_id: str, host: str) -> Any:
    body = req.body
    version = req.header.api_version
    session_ms = _ms(body.session_timeout)
    result = await state.groups.join_group(
        gm.JoinGroupRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=body.protocol_type,
            protocols=tuple(gm.Protocol(p.name, bytes(p.metadata)) for p in body.protocols),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=_ms(getattr(body, "rebalance_timeout", None), session_ms),
            client_id=client_id,
            client_host=host,
            require_known_member_id=version >= 4,
            reason=getattr(body, "reason", None),
        )
    )
    return _resp(
        req,
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in result.members
        ],
    )


async def handle_sync_group(state: BrokerState, req: Request) -> Any:
    body = req.body
    result = await state.groups.sync_group(
        gm.SyncGroupRequest(
            group_id=body.group_id,
            generation_id=int(body.generation_id),
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=getattr(body, "protocol_type", None),
            protocol_name=getattr(body, "protocol_name", None),
            assignments={a.member_id: bytes(a.assignment) for a in body.assignments},
        )
    )
    return _resp(
        req,
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_heartbeat(state: BrokerState, req: Request) -> Any:
    body = req.body
    result = await state.groups.heartbeat(
        gm.HeartbeatRequest(
            group_id=body.group_id,
            generation_id=int(body.generation_id),
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
        )
    )
    return _resp(req, error_code=result.error_code)


async def handle_leave_group(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    if version >= 3:
        members = tuple(
            gm.LeavingMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                reason=getattr(m, "reason", None),
            )
            for m in body.members
        )
    else:
        members = (gm.LeavingMember(member_id=body.member_id),)
    result = await state.groups.leave_group(
        gm.LeaveGroupRequest(group_id=body.group_id, members=members)
    )
    code = result.error_code
    if version < 3 and code == ErrorCode.NONE and result.members:
        code = result.members[0].error_code
    return _resp(
        req,
        error_code=code,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "error_code": m.error_code,
            }
            for m in result.members
        ],
    )


def commit_partitions(topics: Any) -> tuple[gm.OffsetCommitPartition, ...]:
    """The partitions of an OffsetCommit or TxnOffsetCommit request (same topic layout)."""
    return tuple(
        gm.OffsetCommitPartition(
            topic=t.name,
            partition=int(p.partition_index),
            offset=int(p.committed_offset),
            leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
            metadata=p.committed_metadata,
        )
        for t in topics
        for p in t.partitions
    )


def commit_results(result: gm.OffsetCommitResponse) -> list[dict[str, Any]]:
    """The ``topics`` of an OffsetCommit or TxnOffsetCommit response, grouped by topic."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in result.partitions:
        by_topic.setdefault(r.topic, []).append(
            {"partition_index": r.partition, "error_code": r.error_code}
        )
    return [{"name": n, "partitions": ps} for n, ps in by_topic.items()]


async def handle_offset_commit(state: BrokerState, req: Request) -> Any:
    body = req.body
    parts = commit_partitions(body.topics)
    result = await state.groups.commit_offsets(
        gm.OffsetCommitRequest(
            group_id=body.group_id,
            generation_id=int(body.generation_id_or_member_epoch),
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            retention_time_ms=_ms(getattr(body, "retention_time", None)),
            partitions=parts,
        )
    )
    return _resp(req, topics=commit_results(result))


def _fetch_group_of(group_id: str, topics: Any) -> gm.OffsetFetchGroup:
    if topics is None:
        return gm.OffsetFetchGroup(group_id=group_id, partitions=None)
    return gm.OffsetFetchGroup(
        group_id=group_id,
        partitions=tuple(
            gm.TopicPartition(t.name, int(p)) for t in topics for p in t.partition_indexes
        ),
    )


def _topics_of(result: gm.OffsetFetchGroupResult) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for o in result.partitions:
        by_topic.setdefault(o.topic, []).append(
            {
                "partition_index": o.partition,
                "committed_offset": o.offset,
                "committed_leader_epoch": o.leader_epoch,
                "metadata": o.metadata,
                "error_code": o.error_code,
            }
        )
    return [{"name": n, "partitions": ps} for n, ps in by_topic.items()]


async def handle_offset_fetch(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    if version >= 8:
        groups = tuple(_fetch_group_of(g.group_id, g.topics) for g in body.groups)
    else:
        groups = (_fetch_group_of(body.group_id, body.topics),)
    result = await state.groups.fetch_offsets(
        gm.OffsetFetchRequest(
            groups=groups, require_stable=bool(getattr(body, "require_stable", False))
        )
    )
    if version >= 8:
        return _resp(
            req,
            groups=[
                {"group_id": g.group_id, "topics": _topics_of(g), "error_code": g.error_code}
                for g in result.groups
            ],
        )
    g = result.groups[0]
    return _resp(req, topics=_topics_of(g), error_code=g.error_code)


async def handle_list_groups(state: BrokerState, req: Request) -> Any:
    body = req.body
    result = await state.groups.list_groups(
        gm.ListGroupsRequest(states_filter=tuple(getattr(body, "states_filter", ()) or ()))
    )
    return _resp(
        req,
        error_code=result.error_code,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.group_state,
                "group_type": g.group_type,
            }
            for g in result.groups
        ],
    )


async def handle_describe_groups(state: BrokerState, req: Request) -> Any:
    result = await state.groups.describe_groups(
        gm.DescribeGroupsRequest(group_ids=tuple(req.body.groups))
    )
    group_ops = authorized_operations(
        ResourceType.GROUP, bool(getattr(req.body, "include_authorized_operations", False))
    )
    return _resp(
        req,
        groups=[
            {
                "error_code": g.error_code,
                "group_id": g.group_id,
                "group_state": g.group_state,
                "protocol_type": g.protocol_type,
                "protocol_data": g.protocol_data,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in g.members
                ],
                "authorized_operations": group_ops
                if g.error_code == ErrorCode.NONE
                else NOT_REQUESTED,
            }
            for g in result.groups
        ],
    )


async def handle_delete_groups(state: BrokerState, req: Request) -> Any:
    result = await state.groups.delete_groups(
        gm.DeleteGroupsRequest(group_ids=tuple(req.body.groups_names))
    )
    return _resp(
        req, results=[{"group_id": r.group_id, "error_code": r.error_code} for r in result.results]
    )


async def handle_offset_delete(state: BrokerState, req: Request) -> Any:
    body = req.body
    result = await state.groups.delete_offsets(
        gm.OffsetDeleteRequest(
            group_id=body.group_id,
            partitions=tuple(
                gm.TopicPartition(t.name, int(p.partition_index))
                for t in body.topics
                for p in t.partitions
            ),
        )
    )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in result.partitions:
        by_topic.setdefault(r.topic, []).append(
            {"partition_index": r.partition, "error_code": r.error_code}
        )
    return _resp(
        req,
        error_code=result.error_code,
        topics=[{"name": n, "partitions": ps} for n, ps in by_topic.items()],
    )
