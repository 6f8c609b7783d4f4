"""The marker channel: WriteTxnMarkers from the transaction coordinator to partition leaders.

Once a transaction's Prepare* is durable, the coordinator hands its partitions to ``write``,
which resolves when every partition's leader has appended the marker (or the partition has
no leader any more: its topic is gone, and the marker is dropped, as in Kafka). Markers go
over the wire to every leader, this broker included in single-node mode, so there is one
path. They are never timed out: a retriable answer (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS*, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR) or
a lost connection re-resolves the leader and retries after ``retry_backoff_ms``. An
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED answer abandons that transaction's
markers: it stays in Prepare* until a newer coordinator finishes it. UNSUPPORTED_VERSION
and UNSUPPORTED_FOR_MESSAGE_FORMAT count the partition as done. Every retry resolves the
leader afresh, so a marker follows leadership to another broker or back to a restarted one;
a marker whose leader cannot be resolved (no live leader, endpoint unknown, the resolver
failing) waits and is resolved again, logged once each time its reason changes. A marker is
dropped only when the resolver says its topic is gone.

Each destination broker has one sender task and one bounded queue (``queue_bound`` markers).
A round (connect, send, answer) is bounded by twice ``request_timeout_s`` even when the
connection's own timeouts do not cover a step; a connection left unused longer than
``connection_max_idle_s`` (Kafka clients' 9 min) is closed and replaced before the next
round, as the peer would close it as idle at its own 10 min. A sender never dies of a
failed round: any error sends that round's markers back through resolution; if it ends
anyway, its queue is re-routed and the next marker for that destination starts a new
sender. When a destination's queue is full, ``write`` waits for room: the EndTxn that led
to it was already answered, so what waits is only that transaction's completion (its id
keeps answering CONCURRENT_TRANSACTIONS), never a request handler or the event loop. A
sender sends one WriteTxnMarkers per round with every marker queued for it, grouped by
transaction. ``drop_owner`` cancels the queued markers of a ``__transaction_state``
partition this broker no longer leads: the new coordinator resends them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
DEFAULT_QUEUE_BOUND = 10_000
DEFAULT_RETRY_BACKOFF_MS = 100
DEFAULT_REQUEST_TIMEOUT_S = 30.0
#: A sender's connection unused this long is closed and a new one made for its next round:
#: Kafka clients' ``connections.max.idle.ms`` (9 min), below the brokers' (10 min), so a
#: round never starts on a connection the peer has just closed as idle and then waits out a
#: failure and a retry backoff.
DEFAULT_CONNECTION_MAX_IDLE_S = 540.0

_RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
_ABANDON = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_DONE = frozenset({ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT})


@dataclass(frozen=True, slots=True)
class Destination:
    node_id: int
    host: str
    port: int


class Unknown(Enum):
    """The partition has a leader whose address is not known yet: retry later."""

    ENDPOINT = 0


#: The leader of a partition: its address, None when the partition has no leader (its topic
#: was deleted), or ``Unknown.ENDPOINT``.
Resolve = Callable[[TopicPartition], Destination | Unknown | None]


class Connection(Protocol):
    async def call(self, api_key: ApiKey, version: int, timeout_s: float, **fields: Any) -> Any: ...

    async def close(self) -> None: ...


Connect = Callable[[Destination], Awaitable[Connection]]


class Outcome(Enum):
    WRITTEN = 0
    DROPPED = 1
    ABANDONED = 2
    CANCELLED = 3


@dataclass(slots=True, eq=False)
class _Job:
    owner: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partition: TopicPartition
    future: asyncio.Future[Outcome] = field(repr=False)
    #: Why the last resolution could not route the marker (logged once per change).
    waiting: str = field(default="", repr=False)

    def wait_reason(self, reason: str) -> None:
        if reason != self.waiting:
            self.waiting = reason
            log.info("marker for %s: %s; retrying", self.partition, reason)

    def settle(self, outcome: Outcome) -> None:
        if not self.future.done():
            self.future.set_result(outcome)


class MarkerChannel:
    def __init__(
        self,
        resolve: Resolve,
        connect: Connect,
        *,
        queue_bound: int = DEFAULT_QUEUE_BOUND,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        connection_max_idle_s: float = DEFAULT_CONNECTION_MAX_IDLE_S,
    ) -> None:
        self._resolve = resolve
        self._connect = connect
        self._max_idle_s = connection_max_idle_s
        self._queue_bound = queue_bound
        self._backoff_s = retry_backoff_ms / 1000
        self._timeout_s = request_timeout_s
        self._queues: dict[Destination, asyncio.Queue[_Job]] = {}
        self._senders: dict[Destination, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: set[_Job] = set()
        self._closed = False
        #: Markers written per outcome (a test and metrics seam).
        self.sent_requests = 0

    async def write(
        self,
        owner: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
        on_done: Callable[[TopicPartition], None] = lambda _tp: None,
    ) -> bool:
        """Write the markers; True once every partition has its marker (or no leader), False
        if the transaction's markers were abandoned or cancelled."""
        loop = asyncio.get_running_loop()
        jobs = [
            _Job(
                owner,
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                tp,
                loop.create_future(),
            )
            for tp in sorted(partitions)
        ]
        for job in jobs:
            self._pending.add(job)
            job.future.add_done_callback(self._forget(job))
            await self._enqueue(job)
        ok = True
        for job in jobs:
            outcome = await job.future
            if outcome in (Outcome.WRITTEN, Outcome.DROPPED):
                on_done(job.partition)
            else:
                ok = False
        return ok

    def _forget(self, job: _Job) -> Callable[[asyncio.Future[Outcome]], None]:
        def forget(_f: asyncio.Future[Outcome]) -> None:
            self._pending.discard(job)

        return forget

    def drop_owner(self, owner: int) -> None:
        """Cancel every unfinished marker of ``__transaction_state-<owner>``."""
        for job in list(self._pending):
            if job.owner == owner:
                job.settle(Outcome.CANCELLED)

    async def close(self) -> None:
        self._closed = True
        for job in list(self._pending):
            job.settle(Outcome.CANCELLED)
        tasks = [*self._senders.values(), *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- queues -------------------------------------------------------------------------------

    async def _enqueue(self, job: _Job) -> None:
        if job.future.done():
            return
        if self._closed:
            job.settle(Outcome.CANCELLED)
            return
        try:
            dest = self._resolve(job.partition)
        except Exception as e:
            job.wait_reason(f"resolving its leader failed ({e!r})")
            self._retry_later([job])
            return
        if dest is None:
            log.info("topic of %s is gone: dropping its marker", job.partition)
            job.settle(Outcome.DROPPED)
            return
        if isinstance(dest, Unknown):
            job.wait_reason("its leader is not known")
            self._retry_later([job])
            return
        queue = self._queues.get(dest)
        sender = self._senders.get(dest)
        if queue is None or sender is None or sender.done():
            if queue is None:
                queue = self._queues[dest] = asyncio.Queue(self._queue_bound)
            self._senders[dest] = asyncio.get_running_loop().create_task(self._send_loop(dest))
        await queue.put(job)

    def _retry_later(self, jobs: list[_Job]) -> None:
        async def retry() -> None:
            await asyncio.sleep(self._backoff_s)
            for job in jobs:
                await self._enqueue(job)

        if self._closed:
            for job in jobs:
                job.settle(Outcome.CANCELLED)
            return

        self._spawn(retry())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- sending ------------------------------------------------------------------------------

    async def _send_loop(self, dest: Destination) -> None:
        queue = self._queues[dest]
        conn: Connection | None = None
        used_at = 0.0
        loop = asyncio.get_running_loop()
        failing = ""
        try:
            while True:
                jobs = [await queue.get()]
                while not queue.empty():
                    jobs.append(queue.get_nowait())
                jobs = [j for j in jobs if not j.future.done()]
                if not jobs:
                    continue
                if conn is not None and loop.time() - used_at > self._max_idle_s:
                    await _closed(conn)
                    conn = None
                try:
                    async with asyncio.timeout(2 * self._timeout_s):
                        if conn is None:
                            conn = await self._connect(dest)
                        response = await conn.call(
                            ApiKey.WRITE_TXN_MARKERS,
                            WRITE_TXN_MARKERS_VERSION,
                            self._timeout_s,
                            markers=_request_markers(jobs),
                        )
                    used_at = loop.time()
                    self.sent_requests += 1
                    failing = ""
                    self._handle(jobs, response)
                except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as e:
                    if type(e).__name__ != failing:
                        failing = type(e).__name__
                        log.info(
                            "WriteTxnMarkers to broker %d failed: %r; retrying", dest.node_id, e
                        )
                    await _closed(conn)
                    conn = None
                    self._retry_later(jobs)
                except Exception:
                    failing = ""
                    log.exception("WriteTxnMarkers to broker %d failed; retrying", dest.node_id)
                    await _closed(conn)
                    conn = None
                    self._retry_later(jobs)
        finally:
            await _closed(conn)
            if not self._closed:
                self._reroute(queue)

    def _reroute(self, queue: asyncio.Queue[_Job]) -> None:
        """A sender that ended hands its queued markers back to resolution."""
        jobs: list[_Job] = []
        while not queue.empty():
            jobs.append(queue.get_nowait())
        if jobs:
            self._retry_later(jobs)

    def _handle(self, jobs: list[_Job], response: Any) -> None:
        errors: dict[tuple[int, str, int], ErrorCode] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for part in topic.partitions:
                    code = int(part.error_code)
                    errors[(int(marker.producer_id), topic.name, int(part.partition_index))] = (
                        ErrorCode(code)
                        if code in ErrorCode._value2member_map_
                        else ErrorCode.UNKNOWN_SERVER_ERROR
                    )
        retry: list[_Job] = []
        abandoned: set[tuple[int, int]] = set()
        for job in jobs:
            code = errors.get(
                (job.producer_id, job.partition.topic, job.partition.partition),
                ErrorCode.NETWORK_EXCEPTION,
            )
            if code is ErrorCode.NONE or code in _DONE:
                job.settle(Outcome.WRITTEN)
            elif code in _ABANDON:
                log.warning(
                    "marker for producer %d on %s refused (%s): abandoning the transaction's"
                    " markers",
                    job.producer_id,
                    job.partition,
                    code.name,
                )
                abandoned.add((job.producer_id, job.producer_epoch))
                job.settle(Outcome.ABANDONED)
            else:
                job.wait_reason(code.name if code in _RETRIABLE else f"unexpected {code.name}")
                retry.append(job)
        if abandoned:
            for job in list(self._pending):
                if (job.producer_id, job.producer_epoch) in abandoned:
                    job.settle(Outcome.ABANDONED)
        if retry:
            self._retry_later(retry)


async def _closed(conn: Connection | None) -> None:
    if conn is not None:
        try:
            await conn.close()
        except Exception:
            log.debug("closing a marker connection failed", exc_info=True)


def _request_markers(jobs: list[_Job]) -> list[dict[str, Any]]:
    """One marker entry per transaction, each with its topics and partitions."""
    grouped: dict[tuple[int, int, bool, int], dict[str, list[int]]] = {}
    for job in jobs:
        key = (job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch)
        topics = grouped.setdefault(key, {})
        topics.setdefault(job.partition.topic, []).append(job.partition.partition)
    return [
        {
            "producer_id": pid,
            "producer_epoch": epoch,
            "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [
                {"name": name, "partition_indexes": sorted(set(parts))}
                for name, parts in sorted(topics.items())
            ],
        }
        for (pid, epoch, commit, coordinator_epoch), topics in grouped.items()
    ]
