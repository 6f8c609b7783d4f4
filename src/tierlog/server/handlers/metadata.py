"""Metadata: this broker is the only broker and the leader of every partition.

Unknown topics are auto-created only when both the client allows it and
``auto.create.topics.enable`` is on; Kafka's default is on, tierlog's tests turn it off,
because auto-creation on Metadata silently creates empty topics for typos and for consumers
that start before their producer.
"""

from __future__ import annotations

import uuid
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.handlers.authorized_operations import (
    NOT_REQUESTED,
    ResourceType,
    authorized_operations,
)
from tierlog.server.state import LEADER_EPOCH, BrokerState
from tierlog.server.topics import TopicInfo

_NIL = uuid.UUID(int=0)


def broker_entry(state: BrokerState) -> dict[str, Any]:
    host, port = state.advertised
    return {"node_id": state.node_id, "host": host, "port": port, "rack": None}


def topic_entry(state: BrokerState, info: TopicInfo) -> dict[str, Any]:
    node = state.node_id
    return {
        "error_code": 0,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for p in range(info.partitions)
        ],
        "topic_authorized_operations": NOT_REQUESTED,
    }


def _error_entry(name: str | None, topic_id: uuid.UUID | None, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id or _NIL,
        "is_internal": False,
        "partitions": [],
    }


def maybe_auto_create(state: BrokerState, name: str, allowed: bool) -> TopicInfo | None:
    if not (allowed and state.config.auto_create_topics):
        return None
    return state.topics.create(name)


async def handle_metadata(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    allow_auto = bool(getattr(body, "allow_auto_topic_creation", True))
    requested = body.topics
    topics: list[dict[str, Any]] = []
    if requested is None or (version == 0 and not requested):
        topics = [topic_entry(state, t) for t in state.topics.all()]
    else:
        for t in requested:
            name = t.name
            tid = getattr(t, "topic_id", None)
            if name is None and tid is not None and tid != _NIL:
                info = state.topics.by_id(tid)
                topics.append(
                    topic_entry(state, info)
                    if info is not None
                    else _error_entry(None, tid, ErrorCode.UNKNOWN_TOPIC_ID)
                )
                continue
            if name is None:
                topics.append(_error_entry(None, tid, ErrorCode.INVALID_REQUEST))
                continue
            info = state.topics.get(name)
            if info is None:
                try:
                    info = maybe_auto_create(state, name, allow_auto)
                except KafkaError as e:
                    topics.append(_error_entry(name, None, e.code))
                    continue
            if info is None:
                topics.append(_error_entry(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                topics.append(topic_entry(state, info))
    topic_ops = authorized_operations(
        ResourceType.TOPIC, bool(getattr(body, "include_topic_authorized_operations", False))
    )
    for entry in topics:
        if entry["name"] is not None:
            entry["topic_authorized_operations"] = topic_ops
    return mk(
        response_schema(ApiKey.METADATA, version),
        throttle_time=0,
        brokers=[broker_entry(state)],
        cluster_id=state.cluster_id,
        controller_id=state.node_id,
        topics=topics,
        cluster_authorized_operations=authorized_operations(
            ResourceType.CLUSTER,
            bool(getattr(body, "include_cluster_authorized_operations", False)),
        ),
    )
