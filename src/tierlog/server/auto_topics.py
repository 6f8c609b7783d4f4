"""Topics a broker creates on its own in cluster mode (Kafka's ``AutoTopicCreationManager``
in ZooKeeper mode): ``__consumer_offsets`` on the first FindCoordinator, and unknown topics
named in Metadata when ``auto.create.topics.enable`` and the request allow it.

Like Kafka's ``AdminZkClient.createTopic``, any broker writes the topic's config and
assignment (rack-aware round robin over the live brokers); the controller, whose view
shows the new topic, writes each partition's first state, and every replica's broker then
creates its local log. The caller answers at once with a retriable error
(COORDINATOR_NOT_AVAILABLE, LEADER_NOT_AVAILABLE) and the client retries until the
partitions have leaders. A replication factor above the live brokers is refused, as Kafka
does: the topic is not created and the error is logged.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping

from tierlog.cluster.assignment import assign_replicas
from tierlog.cluster.broker_writes import ZooKeeperError, create_topic_znodes
from tierlog.log.checkpoint import topic_id_to_base64
from tierlog.protocol.errors import ErrorCode
from tierlog.replication.manager import ReplicaManager

log = logging.getLogger(__name__)


class AutoTopics:
    """At most one creation of a name in flight per broker."""

    def __init__(self, replication: ReplicaManager) -> None:
        self._replication = replication
        self._creating: dict[str, asyncio.Task[ErrorCode]] = {}

    async def create(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> ErrorCode:
        """Create ``name`` through ZooKeeper; NONE when written (or already there), else
        INVALID_REPLICATION_FACTOR (too few live brokers) or an unavailable error."""
        task = self._creating.get(name)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._create(name, partitions, replication_factor, dict(configs))
            )
            self._creating[name] = task
            task.add_done_callback(lambda _t: self._creating.pop(name, None))
        return await asyncio.shield(task)

    async def _create(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> ErrorCode:
        repl = self._replication
        view, node = repl.view, repl.node
        if view is None or node is None:
            return ErrorCode.LEADER_NOT_AVAILABLE
        if name in view.topics():
            return ErrorCode.NONE
        live = {b: lb.registration.rack for b, lb in view.brokers().items()}
        if len(live) < replication_factor:
            log.warning(
                "not creating %s: replication factor %d larger than available brokers %d",
                name,
                replication_factor,
                len(live),
            )
            return ErrorCode.INVALID_REPLICATION_FACTOR
        try:
            assignment = assign_replicas(live, partitions, replication_factor)
        except ValueError as e:
            log.warning("not creating %s: %s", name, e)
            return ErrorCode.INVALID_REPLICATION_FACTOR
        topic_id = topic_id_to_base64(uuid.uuid4())
        try:
            created = await asyncio.to_thread(
                create_topic_znodes, node.member.zk.kazoo, name, topic_id, assignment, configs
            )
        except ZooKeeperError as e:
            log.warning("creating %s failed: %s", name, e)
            return ErrorCode.LEADER_NOT_AVAILABLE
        if created:
            log.info(
                "auto-created topic %s: %d partitions, replication factor %d",
                name,
                partitions,
                replication_factor,
            )
        return ErrorCode.NONE
