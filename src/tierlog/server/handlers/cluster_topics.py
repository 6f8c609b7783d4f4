"""CreateTopics in cluster mode: through the controller (spec/kafka-replication.md Z-13).

Only the controller creates topics (NOT_CONTROLLER elsewhere; clients send CreateTopics to
the ``controller_id`` of their Metadata). It validates the request as the single-node path
does (name, partitions, configs), assigns replicas rack-aware round robin as Kafka does
(``cluster.assignment``) or takes the request's ``replica_assignment``, and writes config,
assignment and the first partition states in one fenced multi-op
(``cluster.topic_creation``). It answers once its own broker holds the topic, which
follows from its view of the new znodes. Tiered topics are created the same way: their
remote log tasks follow the replicas' leadership (``server.tiering``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from tierlog.cluster.assignment import assign_or_refuse
from tierlog.cluster.fencing import ControllerMovedError
from tierlog.cluster.topic_creation import TopicExistsError, create_topic
from tierlog.config.topic import describe_topic_config
from tierlog.log.checkpoint import topic_id_from_base64, topic_id_to_base64
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.handlers.admin_topics import now_ms
from tierlog.server.handlers.cluster_admin import require_controller
from tierlog.server.quotas.mutation import MutationQuota
from tierlog.server.state import BrokerState

_NIL = uuid.UUID(int=0)


def _assignment(state: BrokerState, t: Any, live: dict[int, str | None]) -> dict[int, list[int]]:
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        out = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in t.assignments}
        for replicas in out.values():
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Invalid replica list.")
            unknown = [b for b in replicas if b not in live]
            if unknown:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown or dead brokers {unknown}."
                )
        if sorted(out) != list(range(len(out))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered from 0."
            )
        return out
    partitions = state.config.num_partitions if t.num_partitions == -1 else t.num_partitions
    rf = (
        state.config.default_replication_factor
        if t.replication_factor == -1
        else t.replication_factor
    )
    return assign_or_refuse(live, partitions, rf)


async def _create(state: BrokerState, t: Any, validate_only: bool, timeout_s: float) -> Any:
    repl, view, writer = require_controller(state)
    live = {b: lb.registration.rack for b, lb in view.brokers().items()}
    assignment = _assignment(state, t, live)
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    info = state.topics.create(t.name, len(assignment), 1, configs, validate_only=True)
    rf = len(next(iter(assignment.values())))
    if validate_only:
        return info, rf
    topic_id = topic_id_to_base64(uuid.uuid4())
    try:
        await asyncio.to_thread(
            create_topic, writer, t.name, topic_id, assignment, configs, set(live)
        )
    except TopicExistsError as e:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, str(e)) from None
    except ControllerMovedError as e:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, str(e)) from None
    await repl.wait_topic(t.name, timeout_s)
    info.topic_id = topic_id_from_base64(topic_id)
    return info, rf


async def handle_create_topics(state: BrokerState, req: Request, quota: MutationQuota) -> Any:
    body = req.body
    timeout_s = max(body.timeout.total_seconds(), 0.0)
    results: list[dict[str, Any]] = []
    names = [t.name for t in body.topics]
    for t in body.topics:
        entry: dict[str, Any] = {"name": t.name, "topic_id": _NIL, "configs": None}
        try:
            if names.count(t.name) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic name in the request.")
            if not body.validate_only:
                quota.check(now_ms())
            info, rf = await _create(state, t, body.validate_only, timeout_s)
            if not body.validate_only:
                quota.record(info.partitions, now_ms())
            entry.update(
                error_code=0,
                error_message=None,
                topic_id=info.topic_id,
                num_partitions=info.partitions,
                replication_factor=rf,
                configs=[
                    {
                        "name": e.name,
                        "value": e.value,
                        "read_only": e.read_only,
                        "config_source": int(e.source),
                        "is_sensitive": e.sensitive,
                    }
                    for e in describe_topic_config(info.overrides, state.config)
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
