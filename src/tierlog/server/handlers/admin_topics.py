"""CreateTopics, DeleteTopics, CreatePartitions: thin wrappers over ``TopicManager``.

Each takes the request's ``MutationQuota`` (KIP-599, ``server.quotas.mutation``): a topic is
checked against it before its write and charged its partitions after."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tierlog.config.topic import ConfigEntry, describe_topic_config
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.quotas.mutation import MutationQuota
from tierlog.server.state import BrokerState
from tierlog.server.topics import TopicInfo

_NIL = uuid.UUID(int=0)


def now_ms() -> float:
    return time.monotonic() * 1000


async def handle_create_topics(state: BrokerState, req: Request, quota: MutationQuota) -> Any:
    body = req.body
    results: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for t in body.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in body.topics:
        entry: dict[str, Any] = {"name": t.name, "topic_id": _NIL, "configs": None}
        try:
            if seen[t.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic name in the request.")
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        "Both numPartitions or replicationFactor and replicasAssignments "
                        "were set. Both cannot be used at the same time.",
                    )
                bad = [a for a in t.assignments if list(a.broker_ids) != [state.node_id]]
                if bad:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Replica assignments must name only broker {state.node_id}.",
                    )
                num_partitions, rf = len(t.assignments), 1
            else:
                num_partitions, rf = t.num_partitions, t.replication_factor
            configs = {c.name: c.value for c in t.configs}
            if not body.validate_only:
                quota.check(now_ms())
            info = state.topics.create(
                t.name, num_partitions, rf, configs, validate_only=body.validate_only
            )
            if not body.validate_only:
                quota.record(info.partitions, now_ms())
                if state.tiering is not None:
                    state.tiering.partitions_added([info.name])
            entry.update(
                error_code=0,
                error_message=None,
                topic_id=info.topic_id,
                num_partitions=info.partitions,
                replication_factor=1,
                configs=[
                    {
                        "name": e.name,
                        "value": e.value,
                        "read_only": e.read_only,
                        "config_source": int(e.source),
                        "is_sensitive": e.sensitive,
                    }
                    for e in _describe_new(state, info)
                ],
            )
        except KafkaError as e:
            entry.update(
                error_code=e.code, error_message=e.message, num_partitions=-1, replication_factor=-1
            )
        results.append(entry)
    return mk(
        response_schema(ApiKey.CREATE_TOPICS, req.header.api_version),
        throttle_time=0,
        topics=results,
    )


def _describe_new(state: BrokerState, info: TopicInfo) -> list[ConfigEntry]:
    return describe_topic_config(info.overrides, state.config)


async def handle_delete_topics(state: BrokerState, req: Request, quota: MutationQuota) -> Any:
    body = req.body
    version = req.header.api_version
    results: list[dict[str, Any]] = []
    if version >= 6:
        targets = [(t.name, t.topic_id) for t in body.topics]
    else:
        targets = [(name, None) for name in body.topic_names]
    for requested_name, tid in targets:
        entry: dict[str, Any] = {"name": requested_name, "topic_id": tid or _NIL}
        name = requested_name
        try:
            if name is None:
                info = state.topics.by_id(tid) if tid is not None else None
                if info is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "Unknown topic id.")
                name = info.name
                entry["name"] = name
            quota.check(now_ms())
            if state.tiering is not None and state.topics.get(name) is not None:
                await state.tiering.before_topic_delete(name)
            info = state.topics.delete(name)
            quota.record(info.partitions, now_ms())
            entry.update(topic_id=info.topic_id, error_code=0, error_message=None)
            for p in range(info.partitions):
                state.purgatory.notify((name, p))
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        results.append(entry)
    return mk(response_schema(ApiKey.DELETE_TOPICS, version), throttle_time=0, responses=results)


async def answer_create_partitions(
    req: Request, grow: Callable[[Any, bool], Awaitable[int]], quota: MutationQuota
) -> Any:
    """CreatePartitions' response: ``grow(topic, validate_only)`` for each requested topic
    (it returns how many partitions it added), its ``KafkaError`` as that topic's result; a
    topic named twice is refused, as Kafka refuses it."""
    body = req.body
    names = [t.name for t in body.topics]
    results: list[dict[str, Any]] = []
    for t in body.topics:
        try:
            if names.count(t.name) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if not body.validate_only:
                quota.check(now_ms())
            added = await grow(t, body.validate_only)
            if not body.validate_only:
                quota.record(added, now_ms())
            results.append({"name": t.name, "error_code": 0, "error_message": None})
        except KafkaError as e:
            results.append({"name": t.name, "error_code": e.code, "error_message": e.message})
    return mk(
        response_schema(ApiKey.CREATE_PARTITIONS, req.header.api_version),
        throttle_time=0,
        results=results,
    )


async def handle_create_partitions(state: BrokerState, req: Request, quota: MutationQuota) -> Any:
    async def grow(t: Any, validate_only: bool) -> int:
        if t.assignments is not None and any(
            list(a.broker_ids) != [state.node_id] for a in t.assignments
        ):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignments must name only broker {state.node_id}.",
            )
        before = state.topics.get(t.name)
        state.topics.create_partitions(t.name, t.count, validate_only=validate_only)
        if state.tiering is not None and not validate_only:
            state.tiering.partitions_added([t.name])
        return int(t.count) - (before.partitions if before is not None else 0)

    return await answer_create_partitions(req, grow, quota)
