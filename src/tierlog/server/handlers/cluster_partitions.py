"""CreatePartitions in cluster mode: through the controller (``cluster.partition_creation``).

Only the controller adds partitions; other brokers answer NOT_CONTROLLER, as Kafka's
ZooKeeper-mode brokers do, and clients send CreatePartitions to the ``controller_id`` of
their Metadata. The answer waits, up to the request's timeout, until this broker's view
shows every partition of the topic with a leader, as Kafka's DelayedCreatePartitions waits
for its metadata cache; after that it is REQUEST_TIMED_OUT, though the partitions were
added and get their leaders when replicas are live.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tierlog.cluster.fencing import ControllerMovedError
from tierlog.cluster.partition_creation import add_partitions
from tierlog.protocol.codec import Request
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.handlers.admin_topics import answer_create_partitions
from tierlog.server.handlers.cluster_admin import require_controller
from tierlog.server.quotas.mutation import MutationQuota
from tierlog.server.state import BrokerState
from tierlog.server.topics import MAX_PARTITIONS


async def _create(state: BrokerState, t: Any, validate_only: bool, timeout_s: float) -> int:
    """Grow the topic through the controller; how many partitions were added."""
    repl, view, writer = require_controller(state)
    if t.name in view.deleting_topics():
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
    if t.count > MAX_PARTITIONS:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS} partitions.")
    brokers = {b: lb.registration.rack for b, lb in view.brokers().items()}
    requested = (
        None if t.assignments is None else [[int(b) for b in a.broker_ids] for a in t.assignments]
    )
    try:
        added = await asyncio.to_thread(
            add_partitions,
            writer,
            t.name,
            int(t.count),
            requested,
            brokers,
            validate_only=validate_only,
        )
    except ControllerMovedError as e:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, str(e)) from None
    if validate_only or timeout_s <= 0:
        return len(added)
    if not await repl.wait_partitions(t.name, int(t.count), timeout_s):
        raise KafkaError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"The partitions of {t.name} were added, but not all have a leader yet.",
        )
    return len(added)


async def handle_create_partitions(state: BrokerState, req: Request, quota: MutationQuota) -> Any:
    timeout_s = max(req.body.timeout.total_seconds(), 0.0)

    async def grow(t: Any, validate_only: bool) -> int:
        return await _create(state, t, validate_only, timeout_s)

    return await answer_create_partitions(req, grow, quota)
