"""Metadata and DescribeCluster in cluster mode: the cluster as this broker's view of
ZooKeeper shows it (spec/kafka-replication.md C-1, C-2).

Every live broker is listed with its registered endpoint and rack; each partition carries
its leader, leader epoch, replicas, ISR and offline replicas (replicas whose broker is not
live), and LEADER_NOT_AVAILABLE while its leader is -1 or dead. Lists are never filtered
(checklist 49). The view applies states by epoch, so a reported leader epoch never goes back
(checklist 50). Internal topics not replicated yet (held by each broker alone) keep
their single-node entries. An unknown topic named by a request that allows auto-creation is
created when ``auto.create.topics.enable`` is on (``server.auto_topics``: the assignment is
written to ZooKeeper with ``num.partitions`` and ``default.replication.factor``, and the
controller elects its leaders); the answer is LEADER_NOT_AVAILABLE until the partitions have
leaders, or the creation's error (INVALID_REPLICATION_FACTOR with too few live brokers).
"""

from __future__ import annotations

import uuid
from typing import Any

from tierlog.cluster.cluster_view import ClusterView, LiveBroker
from tierlog.cluster.znodes import NO_LEADER
from tierlog.log.checkpoint import topic_id_from_base64
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.auto_topics import AutoTopics
from tierlog.server.handlers import metadata
from tierlog.server.state import BrokerState

_NIL = uuid.UUID(int=0)
UNAUTHORIZED_OPS = -2147483648


def _endpoint(broker: LiveBroker) -> tuple[str, int]:
    endpoints = broker.registration.endpoints
    if not endpoints:
        return "", -1
    return endpoints[0].host or "127.0.0.1", endpoints[0].port


def _view(state: BrokerState) -> ClusterView | None:
    return None if state.replication is None else state.replication.view


def brokers(state: BrokerState) -> list[dict[str, Any]]:
    view = _view(state)
    if view is None:
        return [metadata.broker_entry(state)]
    out = []
    for broker_id, broker in sorted(view.brokers().items()):
        host, port = _endpoint(broker)
        out.append(
            {"node_id": broker_id, "host": host, "port": port, "rack": broker.registration.rack}
        )
    return out


def controller_id(state: BrokerState) -> int:
    view = _view(state)
    cid = None if view is None else view.controller_id
    return -1 if cid is None else cid


def topic_entry(state: BrokerState, name: str) -> dict[str, Any] | None:
    """The topic as the cluster has it, or None when the cluster does not know it."""
    view = _view(state)
    if view is None:
        return None
    assignment = view.topics().get(name)
    if assignment is None:
        return None
    live = set(view.brokers())
    partitions = []
    for index, info in sorted(view.partitions(name).items()):
        s = info.state
        leader = NO_LEADER if s is None else s.leader
        error = ErrorCode.NONE if leader != NO_LEADER and leader in live else None
        partitions.append(
            {
                "error_code": ErrorCode.LEADER_NOT_AVAILABLE if error is None else error,
                "partition_index": index,
                "leader_id": leader if error is not None else NO_LEADER,
                "leader_epoch": -1 if s is None else s.leader_epoch,
                "replica_nodes": list(info.replicas),
                "isr_nodes": [] if s is None else list(s.isr),
                "offline_replicas": [r for r in info.replicas if r not in live],
            }
        )
    topic_id = topic_id_from_base64(assignment.topic_id) if assignment.topic_id else _NIL
    return {
        "error_code": 0,
        "name": name,
        "topic_id": topic_id,
        "is_internal": name.startswith("__"),
        "partitions": partitions,
        "topic_authorized_operations": UNAUTHORIZED_OPS,
    }


def _entry(state: BrokerState, name: str) -> dict[str, Any]:
    entry = topic_entry(state, name)
    if entry is not None:
        return entry
    info = state.topics.get(name)
    if info is not None and state.replication is not None and not state.replication.manages(name):
        return metadata.topic_entry(state, info)
    return _error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def _error_entry(name: str, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": _NIL,
        "is_internal": False,
        "partitions": [],
    }


async def _auto_created(state: BrokerState, name: str) -> dict[str, Any] | None:
    """Kafka's ``KafkaApis.createTopic`` on Metadata: the entry of a topic being created,
    or None when auto-creation does not apply."""
    repl = state.replication
    if repl is None or not state.config.auto_create_topics or name.startswith("__"):
        return None
    partitions = state.config.num_partitions
    try:
        state.topics.create(name, partitions, 1, {}, validate_only=True)
    except KafkaError as e:
        return _error_entry(name, e.code)
    code = await AutoTopics(repl).create(
        name, partitions, state.config.default_replication_factor, {}
    )
    return _error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE if code is ErrorCode.NONE else code)


async def handle_metadata(state: BrokerState, req: Request) -> Any:
    body = req.body
    version = req.header.api_version
    allow_auto = bool(getattr(body, "allow_auto_topic_creation", True))
    requested = body.topics
    view = _view(state)
    if requested is None or (version == 0 and not requested):
        names = sorted(view.topics()) if view is not None else []
        topics = [_entry(state, n) for n in names]
    else:
        topics = []
        for t in requested:
            name = t.name
            tid = getattr(t, "topic_id", None)
            if name is None and tid is not None and tid != _NIL:
                info = state.topics.by_id(tid)
                name = None if info is None else info.name
            if name is None:
                topics.append(
                    {
                        "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                        "name": None,
                        "topic_id": tid or _NIL,
                        "is_internal": False,
                        "partitions": [],
                    }
                )
                continue
            entry = _entry(state, name)
            if entry["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and allow_auto:
                entry = await _auto_created(state, name) or entry
            topics.append(entry)
    return mk(
        response_schema(ApiKey.METADATA, version),
        throttle_time=0,
        brokers=brokers(state),
        cluster_id=state.cluster_id,
        controller_id=controller_id(state),
        topics=topics,
        cluster_authorized_operations=UNAUTHORIZED_OPS,
    )


async def handle_describe_cluster(state: BrokerState, req: Request) -> Any:
    return mk(
        response_schema(ApiKey.DESCRIBE_CLUSTER, req.header.api_version),
        throttle_time=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=state.cluster_id,
        controller_id=controller_id(state),
        brokers=[
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in brokers(state)
        ],
        cluster_authorized_operations=UNAUTHORIZED_OPS,
    )
