"""The controller's admin APIs in cluster mode: ElectLeaders (43),
AlterPartitionReassignments (45), ListPartitionReassignments (46) and DeleteTopics (20)
(spec/kafka-replication.md Z-12, Z-19, Z-20).

All four are served by the controller only; any other broker answers NOT_CONTROLLER, and
clients (Kafka's admin client, librdkafka, ``tierlog leader-election`` and
``tierlog reassign-partitions``) send them to the ``controller_id`` of their Metadata and
retry there. That is Kafka's own answer in ZK mode (``KafkaController.electLeaders`` and
friends reply NOT_CONTROLLER on an inactive controller). Forwarding through ZooKeeper's
``/admin/preferred_replica_election`` would work for preferred elections only, would answer
before the election and without per-partition errors, and would leave unclean elections and
reassignment listing without a path; the controller already holds the fenced writer and the
view, so it decides and answers itself.

ElectLeaders and DeleteTopics answer once this broker's view shows the outcome (the new
leader epoch; the topic gone), or at the request's timeout, as Kafka waits for its metadata
cache. AlterPartitionReassignments answers once the reassignment is written and the view shows
it (it then runs in the controller), so that ListPartitionReassignments, which reads the
view, sees it at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from tierlog.cluster.cluster_view import ClusterView
from tierlog.cluster.fencing import ControllerMovedError, FencedWriter
from tierlog.cluster.leader_elections import ElectionResult, ElectionType, elect_leaders
from tierlog.cluster.reassignment import Reassignment, alter_reassignments, ongoing
from tierlog.cluster.topic_deletion import request_deletion
from tierlog.log.checkpoint import topic_id_from_base64
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.replication.manager import ReplicaManager
from tierlog.server.handlers.admin_topics import now_ms
from tierlog.server.quotas.mutation import MutationQuota
from tierlog.server.state import BrokerState

_NIL = uuid.UUID(int=0)
POLL_S = 0.05
"""How often a handler looks at its view while it waits for an outcome to show."""


def controller_of(state: BrokerState) -> tuple[ClusterView, FencedWriter] | None:
    repl = state.replication
    node = None if repl is None else repl.node
    controller = None if node is None else node.controller
    view = None if repl is None else repl.view
    if controller is None or view is None or not controller.running:
        return None
    return view, controller.writer


def require_controller(state: BrokerState) -> tuple[ReplicaManager, ClusterView, FencedWriter]:
    """The replication owner, view and fenced writer of this broker as the controller;
    NOT_CONTROLLER raised elsewhere (clients then ask the controller their Metadata names)."""
    repl = state.replication
    held = controller_of(state)
    if repl is None or held is None:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the controller.")
    return repl, *held


async def _wait(done: Callable[[], bool], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done() and loop.time() < deadline:
        await asyncio.sleep(POLL_S)


# ---- ElectLeaders ---------------------------------------------------------------------------
async def handle_elect_leaders(state: BrokerState, req: Request) -> Any:
    body, version = req.body, req.header.api_version
    election = ElectionType(int(body.election_type) if version >= 1 else 0)
    requested: list[tuple[str, int]] | None = (
        None
        if body.topic_partitions is None
        else [(t.topic, int(p)) for t in body.topic_partitions for p in t.partitions]
    )
    held = controller_of(state)
    top_error = ErrorCode.NONE
    results: dict[tuple[str, int], ElectionResult]
    if held is None:
        results = {k: ElectionResult(ErrorCode.NOT_CONTROLLER) for k in requested or []}
        top_error = ErrorCode.NOT_CONTROLLER
    else:
        view, writer = held
        try:
            results = await asyncio.to_thread(elect_leaders, view, writer, election, requested)
        except ControllerMovedError:
            results = {k: ElectionResult(ErrorCode.NOT_CONTROLLER) for k in requested or []}
            top_error = ErrorCode.NOT_CONTROLLER

        def shown() -> bool:
            for (topic, index), r in results.items():
                info = view.partition(topic, index)
                if r.leader_epoch >= 0 and (
                    info is None or info.state is None or info.state.leader_epoch < r.leader_epoch
                ):
                    return False
            return True

        await _wait(shown, max(body.timeout.total_seconds(), 0.0))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), r in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": index, "error_code": r.error, "error_message": r.message}
        )
    fields: dict[str, Any] = {
        "throttle_time": 0,
        "replica_election_results": [
            {"topic": t, "partition_result": parts} for t, parts in by_topic.items()
        ],
    }
    fields["error_code"] = top_error
    return mk(response_schema(ApiKey.ELECT_LEADERS, version), **fields)


# ---- AlterPartitionReassignments / ListPartitionReassignments ------------------------------
async def handle_alter_partition_reassignments(state: BrokerState, req: Request) -> Any:
    body, version = req.body, req.header.api_version
    schema = response_schema(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
    held = controller_of(state)
    requests = {
        t.name: {
            int(p.partition_index): None if p.replicas is None else [int(r) for r in p.replicas]
            for p in t.partitions
        }
        for t in body.topics
    }
    allow_rf_change = bool(body.allow_replication_factor_change) if version >= 1 else True
    top: tuple[ErrorCode, str | None] = (ErrorCode.NONE, None)
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    if held is None:
        top = (ErrorCode.NOT_CONTROLLER, "This broker is not the controller.")
    else:
        view, writer = held
        if not allow_rf_change:
            for topic, wanted in requests.items():
                for p, target in list(wanted.items()):
                    info = view.partition(topic, p)
                    origin = (
                        None if info is None else [r for r in info.replicas if r not in info.adding]
                    )
                    if target is not None and origin is not None and len(target) != len(origin):
                        results[(topic, p)] = (
                            ErrorCode.INVALID_REPLICATION_FACTOR,
                            "The replication factor is changed from "
                            f"{len(origin)} to {len(target)}",
                        )
                        del wanted[p]
        try:
            done = await asyncio.to_thread(alter_reassignments, view, writer, requests)
            results.update({k: (r.error, r.message) for k, r in done.items()})
        except ControllerMovedError as e:
            top = (ErrorCode.NOT_CONTROLLER, str(e))
            done = {}

        def shown() -> bool:
            for (topic, index), r in done.items():
                info = view.partition(topic, index)
                if r.written is None:
                    continue
                seen = (
                    None
                    if info is None
                    else Reassignment(info.replicas, info.adding, info.removing)
                )
                if seen not in (r.written, Reassignment(r.written.target)):
                    return False
            return True

        await _wait(shown, max(body.timeout.total_seconds(), 0.0))
    responses = [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": int(p.partition_index),
                    "error_code": results.get((t.name, int(p.partition_index)), top)[0],
                    "error_message": results.get((t.name, int(p.partition_index)), top)[1],
                }
                for p in t.partitions
            ],
        }
        for t in body.topics
    ]
    return mk(
        schema,
        throttle_time=0,
        error_code=top[0],
        error_message=top[1],
        responses=responses,
    )


async def handle_list_partition_reassignments(state: BrokerState, req: Request) -> Any:
    body, version = req.body, req.header.api_version
    schema = response_schema(ApiKey.LIST_PARTITION_REASSIGNMENTS, version)
    held = controller_of(state)
    if held is None:
        return mk(
            schema,
            throttle_time=0,
            error_code=ErrorCode.NOT_CONTROLLER,
            error_message="This broker is not the controller.",
            topics=[],
        )
    view, _ = held
    wanted = (
        None
        if body.topics is None
        else {t.name: {int(p) for p in t.partition_indexes} for t in body.topics}
    )
    topics = [
        {
            "name": topic,
            "partitions": [
                {
                    "partition_index": info.partition,
                    "replicas": list(info.replicas),
                    "adding_replicas": list(info.adding),
                    "removing_replicas": list(info.removing),
                }
                for info in infos
            ],
        }
        for topic, infos in sorted(ongoing(view, wanted).items())
    ]
    return mk(schema, throttle_time=0, error_code=ErrorCode.NONE, error_message=None, topics=topics)


# ---- DeleteTopics ---------------------------------------------------------------------------
async def handle_delete_topics(state: BrokerState, req: Request, quota: MutationQuota) -> Any:
    body, version = req.body, req.header.api_version
    if version >= 6:
        targets = [(t.name, t.topic_id) for t in body.topics]
    else:
        targets = [(name, None) for name in body.topic_names]
    held = controller_of(state)
    timeout_s = max(body.timeout.total_seconds(), 0.0)
    results: list[dict[str, Any]] = []
    queued: list[str] = []
    for requested, tid in targets:
        name = requested
        entry: dict[str, Any] = {"name": name, "topic_id": tid or _NIL, "error_message": None}
        try:
            if held is None:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the controller.")
            view, writer = held
            if name is None:
                name = next(
                    (
                        n
                        for n, a in view.topics().items()
                        if a.topic_id is not None and _same_id(a.topic_id, tid)
                    ),
                    None,
                )
                if name is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "Unknown topic id.")
                entry["name"] = name
            assignment = view.topics().get(name)
            if assignment is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "This server does not host this topic-partition.",
                )
            if not state.config.get("delete.topic.enable"):
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            if assignment.topic_id is not None:
                entry["topic_id"] = topic_id_from_base64(assignment.topic_id)
            quota.check(now_ms())
            try:
                await asyncio.to_thread(request_deletion, writer, name)
            except ControllerMovedError as e:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, str(e)) from None
            quota.record(len(assignment.partitions), now_ms())
            queued.append(name)
            entry["error_code"] = ErrorCode.NONE
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        results.append(entry)
    if held is not None and queued:
        view = held[0]
        await _wait(lambda: not any(n in view.topics() for n in queued), timeout_s)
        for entry in results:
            if entry["name"] in queued and entry["name"] in view.topics():
                entry.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None)
    return mk(response_schema(ApiKey.DELETE_TOPICS, version), throttle_time=0, responses=results)


def _same_id(text: str, tid: uuid.UUID | None) -> bool:
    return tid is not None and topic_id_from_base64(text) == tid
