"""Where a group's coordinator is in cluster mode: the leader of its ``__consumer_offsets``
partition (Kafka's ZK-mode ``FindCoordinator``); the same for a transactional id and its
``__transaction_state`` partition (``topic``).

The answer comes from this broker's view of the partition state, whether or not that
leader has finished loading the partition (it answers COORDINATOR_LOAD_IN_PROGRESS
meanwhile). While the topic does not exist, the first lookup creates it with
``offsets.topic.num.partitions`` and ``offsets.topic.replication.factor`` and answers
COORDINATOR_NOT_AVAILABLE, as does a partition without a live leader.
"""

from __future__ import annotations

from collections.abc import Mapping

from tierlog.cluster.znodes import NO_LEADER
from tierlog.protocol.errors import ErrorCode
from tierlog.replication.manager import ReplicaManager
from tierlog.server.auto_topics import AutoTopics
from tierlog.server.group.model import CoordinatorEntry
from tierlog.server.group.schema import OFFSETS_TOPIC


class ClusterPlacement:
    def __init__(
        self,
        replication: ReplicaManager,
        auto_topics: AutoTopics,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        topic: str = OFFSETS_TOPIC,
    ) -> None:
        self._topic = topic
        self._replication = replication
        self._auto_topics = auto_topics
        self._num_partitions = num_partitions
        self._replication_factor = replication_factor
        self._configs = dict(configs)

    async def coordinator_for(self, key: str, partition: int) -> CoordinatorEntry:
        view = self._replication.view
        if view is None:
            return _unavailable(key, "the broker has not joined the cluster yet")
        if self._topic not in view.topics():
            code = await self._auto_topics.create(
                self._topic, self._num_partitions, self._replication_factor, self._configs
            )
            why = (
                "fewer live brokers than the topic's replication factor"
                if code is ErrorCode.INVALID_REPLICATION_FACTOR
                else f"{self._topic} is being created"
            )
            return _unavailable(key, why)
        info = view.partition(self._topic, partition)
        leader = NO_LEADER if info is None or info.state is None else info.state.leader
        broker = view.brokers().get(leader)
        if broker is None or not broker.registration.endpoints:
            return _unavailable(key, f"{self._topic}-{partition} has no leader")
        endpoint = broker.registration.endpoints[0]
        return CoordinatorEntry(
            key=key, node_id=leader, host=endpoint.host or "127.0.0.1", port=endpoint.port
        )


def _unavailable(key: str, why: str) -> CoordinatorEntry:
    return CoordinatorEntry(
        key=key,
        node_id=-1,
        host="",
        port=-1,
        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
        error_message=why,
    )
