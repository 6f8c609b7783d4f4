"""``__remote_log_metadata`` for the topic-based RLMM, stored in the broker's own log engine.

The RLMM (``tierlog.tiered.metadata``) may not import the log engine, so it talks to the
topic through the abstract ``MetadataTopicIO``; this is the production adapter. Its calls come
from the RLMM's publisher and consumer threads, never from the event loop:

* appends and reads go straight to ``PartitionLog`` (thread-safe under the log's own lock);
  each append is flushed before it returns because the RLMM acts on the event right after
  (e.g. deletes remote data), and a crash must not lose an event whose effect happened;
* creating the topic must go through the broker's ``TopicManager`` (so Metadata,
  DescribeConfigs and clients such as ``tierlog remote segments`` see it), and that object
  belongs to the event loop, so ``loop_topic_creator`` hops to the loop and waits.

The topic is internal (never tiered: ``LogManager.remote_enabled_for`` excludes it), uses
the delete policy with unlimited retention, and its partition count is whatever it was
created with: ``ensure_topic`` reports the existing count and the RLMM refuses to start on a
mismatch with ``remote.log.metadata.topic.num.partitions``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from tierlog.cluster.assignment import assign_replicas
from tierlog.cluster.topic_creation import TopicExistsError, create_topic
from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.log.checkpoint import topic_id_to_base64
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.fetch_request import fetch_fields
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches
from tierlog.replication.manager import ReplicaManager
from tierlog.replication.wire import BrokerConnection
from tierlog.tiered.metadata import METADATA_TOPIC, MetadataTopicIO

__all__ = [
    "LogMetadataTopicIO",
    "ReplicatedMetadataTopicIO",
    "TopicCreator",
    "loop_topic_creator",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Creates the topic with this many partitions and these configs (or finds it existing).
TopicCreator = Callable[[int, Mapping[str, str]], None]

#: How long an RLMM thread waits for the event loop to create the topic before it gives up
#: on this attempt (the RLMM retries until its initialization timeout).
CREATE_WAIT_S = 30.0


def _values_from(data: bytes, from_offset: int) -> list[tuple[int, bytes]]:
    """(offset, value) of the records in ``data`` from ``from_offset`` on: a read starts at
    the batch holding ``from_offset``, and a record without a value carries no metadata."""
    out: list[tuple[int, bytes]] = []
    for h in scan_batches(data):
        for r in iter_records(data[h.position : h.end]):
            if r.offset >= from_offset and r.value is not None:
                out.append((r.offset, r.value))
    return out


def _record(key: bytes | None, value: bytes) -> bytes:
    """One metadata record in a batch stamped with the wall clock, as a Kafka producer
    stamps CreateTime: a batch stamped 0 is older than any time retention, so a replica of
    this topic that ran with a default ``retention.ms`` for a moment (adopted from disk
    before its definition was known) deleted the whole history at its first retention check."""
    return build_batch([SimpleRecord(value, key)], timestamp=int(time.time() * 1000))


class LogMetadataTopicIO(MetadataTopicIO):
    """``MetadataTopicIO`` over a ``LogManager``.

    Without ``create_topic`` the partitions are created directly in the log engine (tests and
    tools with no broker around); the broker passes ``loop_topic_creator``. ``on_append``
    is told the metadata partition after each append (the broker wakes waiting fetches).
    """

    def __init__(
        self,
        logs: LogManager,
        *,
        create_topic: TopicCreator | None = None,
        on_append: Callable[[int], None] | None = None,
        max_read_bytes: int = 1 << 20,
    ) -> None:
        self._logs = logs
        self._create_topic = create_topic
        self._on_append = on_append
        self._max_read_bytes = max_read_bytes
        self._lock = threading.Lock()

    def _partitions(self) -> dict[int, PartitionLog]:
        return {
            lg.tp.partition: lg for lg in self._logs.all_logs() if lg.tp.topic == METADATA_TOPIC
        }

    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        with self._lock:
            existing = self._partitions()
            if not existing:
                if self._create_topic is not None:
                    self._create_topic(num_partitions, configs)
                else:
                    self._create_logs(num_partitions, configs)
                existing = self._partitions()
                if not existing:
                    raise RuntimeError(f"{METADATA_TOPIC} was not created")
            count = max(existing) + 1
            if sorted(existing) != list(range(count)):
                raise RuntimeError(
                    f"{METADATA_TOPIC} has gaps in its partitions: {sorted(existing)}"
                )
            return count

    def _create_logs(self, num_partitions: int, configs: Mapping[str, str]) -> None:
        cfg = LogConfig(
            retention_ms=int(configs.get("retention.ms", "-1")),
            retention_bytes=int(configs.get("retention.bytes", "-1")),
            cleanup_policy=tuple(configs.get("cleanup.policy", "delete").split(",")),
            remote_storage_enable=False,
        )
        topic_id = uuid.uuid4()
        for p in range(num_partitions):
            self._logs.create_log(TopicPartition(METADATA_TOPIC, p), topic_id, cfg)

    def _log(self, partition: int) -> PartitionLog:
        lg = self._logs.get_log(TopicPartition(METADATA_TOPIC, partition))
        if lg is None:
            raise KeyError(f"{METADATA_TOPIC}-{partition} does not exist")
        return lg

    def append(self, partition: int, key: bytes | None, value: bytes) -> int:
        lg = self._log(partition)
        result = lg.append_as_leader(_record(key, value), leader_epoch=0)
        lg.flush()
        if self._on_append is not None:
            self._on_append(partition)
        return int(result.base_offset)

    def end_offset(self, partition: int) -> int:
        return self._log(partition).log_end_offset

    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        lg = self._log(partition)
        if from_offset >= lg.log_end_offset:
            return []
        data = lg.read(from_offset, self._max_read_bytes).to_bytes()
        return _values_from(data, from_offset)


def loop_topic_creator(
    loop: asyncio.AbstractEventLoop, create: Callable[[int, Mapping[str, str]], Any]
) -> TopicCreator:
    """Run ``create`` (e.g. ``TopicManager.ensure`` for the metadata topic) on ``loop``.

    Called on an RLMM thread; blocks until the loop ran it. Called on the loop's own thread
    (never done by the RLMM, but harmless) it runs inline.
    """

    def run(num_partitions: int, configs: Mapping[str, str]) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            create(num_partitions, configs)
            return

        async def on_loop() -> None:
            create(num_partitions, configs)

        asyncio.run_coroutine_threadsafe(on_loop(), loop).result(CREATE_WAIT_S)

    return run


#: Errors of a metadata append worth another try at the (possibly new) leader.
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

#: How long one metadata append keeps retrying a leader that moves before it fails.
APPEND_DEADLINE_S = 30.0
_PRODUCE_VERSION = 9
_LIST_OFFSETS_VERSION = 7
_FETCH_VERSION = 12


class ReplicatedMetadataTopicIO(MetadataTopicIO):
    """``MetadataTopicIO`` of a broker in cluster mode: ``__remote_log_metadata`` is a
    replicated topic like any other.

    * ``ensure_topic``: the topic is created through the controller (its fenced writer, the
      assignment by Kafka's rules, ``remote.log.metadata.topic.replication.factor``
      replicas) by whichever broker is controller; the others wait until it exists and
      their replicas are local. Too few live brokers for the factor is a retriable failure,
      as Kafka's INVALID_REPLICATION_FACTOR on the RLMM's admin client.
    * ``append``: a Produce with acks=all to the metadata partition's current leader (this
      broker included, through its own listener), so the event is durable on the ISR when
      it returns; a leader change is retried within ``APPEND_DEADLINE_S``.
    * ``read``: the local replica (leader or follower) up to its high watermark, so the
      RLMM never acts on an event a new leader could truncate; a metadata partition with no
      replica here (fewer replicas than brokers) is fetched from its leader as a consumer
      fetches, which also stops at the high watermark;
    * ``end_offset``: the leader's high watermark (asked with ListOffsets when another
      broker leads), as a Kafka consumer's end offset: a replica that is still catching up
      must not make the RLMM declare a user partition loaded before it has read what the
      leader already acknowledged.

    Every call comes from an RLMM thread and hops to the event loop, which owns the
    replication layer; ``attach`` gives it that layer once the broker has joined the cluster
    (until then every call fails and the RLMM retries).
    """

    def __init__(
        self,
        logs: LogManager,
        loop: asyncio.AbstractEventLoop,
        replication_factor: int,
        *,
        max_read_bytes: int = 1 << 20,
    ) -> None:
        self._logs = logs
        self._loop = loop
        self._rf = replication_factor
        self._max_read_bytes = max_read_bytes
        self._repl: ReplicaManager | None = None
        self._conns: dict[int, BrokerConnection] = {}
        """To each leader, for appends (the publisher thread's)."""
        self._read_conns: dict[int, BrokerConnection] = {}
        """To each leader, for end offsets (the consumer thread's)."""
        self._closed = False

    def attach(self, repl: ReplicaManager) -> None:
        self._repl = repl

    def _on_loop(self, coro: Coroutine[Any, Any, _T], timeout_s: float) -> _T:
        if self._closed:
            coro.close()
            raise RuntimeError("the metadata topic is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def _replication(self) -> ReplicaManager:
        repl = self._repl
        if repl is None or repl.view is None:
            raise RuntimeError("this broker has not joined the cluster yet")
        return repl

    # ---- topic ------------------------------------------------------------------------
    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        return self._on_loop(self._ensure(num_partitions, configs), CREATE_WAIT_S + 5)

    async def _ensure(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        repl = self._replication()
        view, node = repl.view, repl.node
        assert view is not None and node is not None
        assignment = view.topics().get(METADATA_TOPIC)
        if assignment is None:
            controller = node.controller
            if controller is None:
                raise RuntimeError(f"waiting for the controller to create {METADATA_TOPIC}")
            live = {b: lb.registration.rack for b, lb in view.brokers().items()}
            replicas = assign_replicas(live, num_partitions, self._rf)
            try:
                await asyncio.to_thread(
                    create_topic,
                    controller.writer,
                    METADATA_TOPIC,
                    topic_id_to_base64(uuid.uuid4()),
                    replicas,
                    dict(configs),
                    set(live),
                )
                log.info(
                    "created %s: %d partitions, replication factor %d",
                    METADATA_TOPIC,
                    num_partitions,
                    self._rf,
                )
            except TopicExistsError:
                pass
        if not await repl.wait_topic(METADATA_TOPIC, CREATE_WAIT_S):
            raise RuntimeError(f"{METADATA_TOPIC} is not local yet")
        created = view.topics().get(METADATA_TOPIC)
        if created is None:
            raise RuntimeError(f"{METADATA_TOPIC} is not in the cluster view yet")
        return len(created.partitions)

    # ---- append -----------------------------------------------------------------------
    def append(self, partition: int, key: bytes | None, value: bytes) -> int:
        batch = _record(key, value)
        return self._on_loop(self._append(partition, batch), APPEND_DEADLINE_S + 5)

    async def _append(self, partition: int, batch: bytes) -> int:
        deadline = self._loop.time() + APPEND_DEADLINE_S
        last = "no leader"
        while self._loop.time() < deadline:
            repl = self._replication()
            info = None if repl.view is None else repl.view.partition(METADATA_TOPIC, partition)
            leader = None if info is None or info.state is None else info.state.leader
            endpoint = None if leader is None or leader < 0 else repl.endpoint_of(leader)
            if leader is None or endpoint is None:
                last = f"no live leader for {METADATA_TOPIC}-{partition}"
                await asyncio.sleep(0.1)
                continue
            try:
                code, offset = await self._produce(leader, endpoint, partition, batch)
            except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as e:
                await self._drop(leader)
                last = repr(e)
                await asyncio.sleep(0.1)
                continue
            if code == ErrorCode.NONE:
                return offset
            if code not in _RETRIABLE:
                raise KafkaError(code, f"appending to {METADATA_TOPIC}-{partition} failed")
            last = code.name
            await asyncio.sleep(0.1)
        raise TimeoutError(f"appending to {METADATA_TOPIC}-{partition}: {last}")

    async def _connection(
        self, conns: dict[int, BrokerConnection], leader: int, endpoint: tuple[str, int]
    ) -> BrokerConnection:
        conn = conns.get(leader)
        if conn is None:
            conn = await BrokerConnection.open(*endpoint, client_id="tierlog-rlmm", timeout_s=10.0)
            conns[leader] = conn
        return conn

    async def _produce(
        self, leader: int, endpoint: tuple[str, int], partition: int, batch: bytes
    ) -> tuple[ErrorCode, int]:
        conn = await self._connection(self._conns, leader, endpoint)
        response = await conn.call(
            ApiKey.PRODUCE,
            _PRODUCE_VERSION,
            APPEND_DEADLINE_S,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=APPEND_DEADLINE_S / 2),
            topic_data=[
                {"name": METADATA_TOPIC, "partition_data": [{"index": partition, "records": batch}]}
            ],
        )
        p = response.responses[0].partition_responses[0]
        return ErrorCode(int(p.error_code)), int(p.base_offset)

    async def _drop(self, leader: int, conns: dict[int, BrokerConnection] | None = None) -> None:
        conn = (self._conns if conns is None else conns).pop(leader, None)
        if conn is not None:
            await conn.close()

    async def aclose(self) -> None:
        """Close the connections to the leaders (on the loop, at broker shutdown)."""
        self._closed = True
        for leader in list(self._conns):
            await self._drop(leader)
        for leader in list(self._read_conns):
            await self._drop(leader, self._read_conns)

    # ---- read -------------------------------------------------------------------------
    def _local(self, partition: int) -> PartitionLog | None:
        """The local replica of a metadata partition, None if this broker holds none."""
        repl = self._replication()
        if repl.partition(METADATA_TOPIC, partition) is None:
            return None
        return self._logs.get_log(TopicPartition(METADATA_TOPIC, partition))

    def _leader(self, partition: int) -> int | None:
        repl = self._replication()
        info = None if repl.view is None else repl.view.partition(METADATA_TOPIC, partition)
        leader = None if info is None or info.state is None else info.state.leader
        return None if leader is None or leader < 0 else leader

    def end_offset(self, partition: int) -> int:
        lg = self._local(partition)
        local = -1 if lg is None else lg.high_watermark
        leader = self._leader(partition)
        if leader == self._replication().broker_id and local >= 0:
            return local
        if leader is None:
            if local >= 0:
                return local
            raise RuntimeError(f"{METADATA_TOPIC}-{partition} has no leader")
        return max(local, self._on_loop(self._leader_end(leader, partition), APPEND_DEADLINE_S))

    async def _leader_end(self, leader: int, partition: int) -> int:
        response = await self._ask_leader(
            leader,
            partition,
            ApiKey.LIST_OFFSETS,
            _LIST_OFFSETS_VERSION,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        )
        p = response.topics[0].partitions[0]
        if int(p.error_code) != 0:
            code = ErrorCode(int(p.error_code))
            raise KafkaError(code, f"end offset of {METADATA_TOPIC}-{partition}")
        return int(p.offset)

    async def _ask_leader(
        self, leader: int, partition: int, api: ApiKey, version: int, **fields: Any
    ) -> Any:
        """One request to a metadata partition's leader on the consumer thread's connection."""
        endpoint = self._replication().endpoint_of(leader)
        if endpoint is None:
            raise RuntimeError(f"the leader {leader} of {METADATA_TOPIC}-{partition} is not live")
        try:
            conn = await self._connection(self._read_conns, leader, endpoint)
            return await conn.call(api, version, 10.0, **fields)
        except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            await self._drop(leader, self._read_conns)
            raise

    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        lg = self._local(partition)
        if lg is not None:
            if from_offset >= lg.high_watermark:
                return []
            data = lg.read(from_offset, self._max_read_bytes, True, "hw").to_bytes()
        else:
            leader = self._leader(partition)
            if leader is None:
                return []
            data = self._on_loop(self._fetch(leader, partition, from_offset), APPEND_DEADLINE_S)
        return _values_from(data, from_offset)

    async def _fetch(self, leader: int, partition: int, offset: int) -> bytes:
        response = await self._ask_leader(
            leader,
            partition,
            ApiKey.FETCH,
            _FETCH_VERSION,
            **fetch_fields(METADATA_TOPIC, partition, offset, self._max_read_bytes),
        )
        p = response.responses[0].partitions[0]
        if int(p.error_code) != 0:
            code = ErrorCode(int(p.error_code))
            raise KafkaError(code, f"fetching {METADATA_TOPIC}-{partition} at {offset}")
        return bytes(p.records or b"")
