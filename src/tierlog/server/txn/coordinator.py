"""The transaction coordinator driver: moves bytes, futures and timers for ``state.py``.

Every decision about a transactional id is made by the pure state machine
(``tierlog.server.txn.state``); this class only

1. keeps the ids of the ``__transaction_state`` partitions this broker leads (``load`` when
   it becomes leader at a coordinator epoch, ``unload`` when it stops), answering
   NOT_COORDINATOR for ids of other partitions and COORDINATOR_LOAD_IN_PROGRESS while loading;
2. writes each decision's metadata through a ``TxnStore`` before applying it (the id is
   pending meanwhile, so concurrent requests get CONCURRENT_TRANSACTIONS), re-checking
   afterwards that the partition is still ours at the same coordinator epoch;
3. after a durable Prepare*, hands the markers to the ``MarkerChannel`` and then writes
   Complete* (retrying a COORDINATOR_NOT_AVAILABLE write; NOT_COORDINATOR leaves it to the
   next owner, which resends the markers of every Prepare* it loads);
4. runs two timers: the abort of timed-out transactions
   (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and the expiry of idle ids
   (``transaction.remove.expired.transaction.cleanup.interval.ms``; a tombstone, then the id
   leaves the cache).

All of it runs on the event loop; decisions are synchronous, so no lock is needed between a
read of the cache and the pending state a decision installs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.group.placement import CoordinatorPlacement
from tierlog.server.owned_writes import OwnedWrites
from tierlog.server.txn import admin
from tierlog.server.txn import state as sm
from tierlog.server.txn.config import TxnCoordinatorConfig
from tierlog.server.txn.load import awaiting_markers, load_records
from tierlog.server.txn.log_store import TxnStore, map_append_error
from tierlog.server.txn.markers import MarkerChannel
from tierlog.server.txn.schema import (
    coordinator_partition,
    encode_key,
    encode_value,
)

log = logging.getLogger(__name__)
#: Every applied transition (Kafka logs these at debug too); its own logger so an operator can
#: follow one transactional id without the rest of the broker's debug output.
transitions = logging.getLogger(f"{__name__}.transitions")

#: Written with TransactionLogValue v1 (flexible: keeps the previous/next producer ids).
VALUE_VERSION = 1
COMPLETE_RETRY_BACKOFF_S = 0.1
#: A coordinator write slower than this is logged: its id is pending meanwhile.
SLOW_WRITE_S = 5.0
_PREPARE = (sm.TxnState.PREPARE_COMMIT, sm.TxnState.PREPARE_ABORT)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class _Owned:
    """One ``__transaction_state`` partition this broker leads."""

    coordinator_epoch: int
    loading: bool = True
    cache: dict[str, sm.TxnMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = sm.NO_PRODUCER_ID
    producer_epoch: int = sm.NO_PRODUCER_EPOCH


class TxnCoordinator:
    """Kafka's transaction coordinator for the partitions this broker leads."""

    def __init__(
        self,
        *,
        config: TxnCoordinatorConfig,
        store: TxnStore,
        markers: MarkerChannel,
        allocate_producer_id: Callable[[], Awaitable[int]],
        clock_ms: Callable[[], int] = _wall_clock_ms,
        placement: CoordinatorPlacement | None = None,
    ) -> None:
        #: Cluster mode: where the coordinator of an id is (FindCoordinator, verification).
        self.placement = placement
        self._config = config
        self._store = store
        self._markers = markers
        self._allocate = allocate_producer_id
        self._now = clock_ms
        self._owned: dict[int, _Owned] = {}
        self._spare_pid: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writes = OwnedWrites()
        self._timers: list[asyncio.Task[None]] = []
        self._closed = False

    @property
    def config(self) -> TxnCoordinatorConfig:
        return self._config

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the abort and expiry timers."""
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.create_task(
                self._every(self._config.abort_timed_out_interval_ms, self.abort_timed_out)
            ),
            loop.create_task(self._every(self._config.remove_expired_interval_ms, self.expire_ids)),
        ]

    async def close(self) -> None:
        self._closed = True
        for t in self._timers:
            t.cancel()
        await self._writes.close(cancel=True)
        await self._markers.close()
        tasks = [*self._timers, *self._tasks]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _every(self, interval_ms: int, fn: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await fn()
            except Exception:
                log.exception("transaction coordinator timer %s failed", fn)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- leadership ---------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return coordinator_partition(transactional_id, self._config.state_log_num_partitions)

    def owns(self, partition: int) -> bool:
        owned = self._owned.get(partition)
        return owned is not None and not owned.loading

    async def load(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became leader of ``__transaction_state-<partition>`` at
        ``coordinator_epoch``: read its ids, then resend the markers of every Prepare*."""
        await self._finish_load(partition, self._begin_load(partition, coordinator_epoch))

    def _begin_load(self, partition: int, coordinator_epoch: int) -> _Owned:
        """From now on the partition's ids answer COORDINATOR_LOAD_IN_PROGRESS."""
        self._markers.drop_owner(partition)
        owned = _Owned(coordinator_epoch)
        self._owned[partition] = owned
        return owned

    async def _finish_load(self, partition: int, owned: _Owned) -> None:
        coordinator_epoch = owned.coordinator_epoch
        started = time.monotonic()
        try:
            records = await self._store.load(partition)
            cache = load_records(records)
        except Exception:
            log.exception("cannot load __transaction_state-%d", partition)
            if self._owned.get(partition) is owned:
                del self._owned[partition]
            return
        if self._owned.get(partition) is not owned:
            return
        owned.cache = cache
        owned.loading = False
        log.info(
            "loaded %d transactional ids of __transaction_state-%d (epoch %d) in %.1f ms",
            len(cache),
            partition,
            coordinator_epoch,
            (time.monotonic() - started) * 1000,
        )
        for meta in awaiting_markers(cache):
            self._spawn(self._send_markers(partition, owned, meta.transactional_id))

    # Kafka's onElection/onResignation, as a replication leadership listener (cluster mode).

    def became_leader(self, partition: int, leader_epoch: int) -> None:
        """Load the partition in the background at coordinator epoch ``leader_epoch``; an
        owned partition re-elected at a newer epoch keeps its ids and takes the new epoch."""
        if self._closed:
            return
        owned = self._owned.get(partition)
        if owned is not None and not owned.loading and owned.coordinator_epoch <= leader_epoch:
            owned.coordinator_epoch = leader_epoch
            return
        self._spawn(self._finish_load(partition, self._begin_load(partition, leader_epoch)))

    def became_follower(self, partition: int, leader_epoch: int) -> None:
        self.unload(partition)

    def stopped(self, partition: int) -> None:
        self.unload(partition)

    def unload(self, partition: int) -> None:
        """This broker stopped leading ``__transaction_state-<partition>``."""
        self._owned.pop(partition, None)
        self._markers.drop_owner(partition)

    def _lookup(
        self, transactional_id: str
    ) -> tuple[int, _Owned, sm.TxnMetadata | None] | ErrorCode:
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        owned = self._owned.get(partition)
        if owned is None:
            return ErrorCode.NOT_COORDINATOR
        if owned.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return partition, owned, owned.cache.get(transactional_id)

    # --- writes -------------------------------------------------------------------------------

    async def _decide(
        self, transactional_id: str, decide: Callable[[sm.TxnMetadata | None], sm.Decision]
    ) -> ErrorCode:
        """The state machine's ``decide`` on ``transactional_id``'s current metadata, applied
        by the partition that owns it; a coordinator that does not own it answers the error."""
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        partition, owned, meta = found
        return await self._apply(partition, owned, decide(meta))

    async def _apply(self, partition: int, owned: _Owned, decision: sm.Decision) -> ErrorCode:
        """Install ``decision``; append its write (if any) and apply the outcome, to the end
        even if the request is cancelled: only this can take the id out of its pending state
        (``OwnedWrites``)."""
        current = decision.current
        written = decision.write
        if current is None:
            return decision.error
        tid = current.transactional_id
        owned.cache[tid] = current
        if written is None:
            if decision.error is not ErrorCode.NONE:
                transitions.debug(
                    "%r: answered %s in %s%s, producer %d epoch %d",
                    tid,
                    decision.error.name,
                    current.state.label,
                    f" (pending {current.pending.label})" if current.pending else "",
                    current.producer_id,
                    current.producer_epoch,
                )
            return decision.error
        # installed above before the write is handed to its task, so that no request decides
        # from the state this decision replaces while the task waits to start
        return await self._writes.run(self._write(partition, owned, decision, written))

    async def _write(
        self, partition: int, owned: _Owned, decision: sm.Decision, written: sm.TxnMetadata
    ) -> ErrorCode:
        tid = written.transactional_id
        value = None if written.state is sm.TxnState.DEAD else written.to_log_value()
        started = time.monotonic()
        try:
            appended = await self._store.append(
                partition, encode_key(tid), encode_value(value, VALUE_VERSION), self._now()
            )
        except Exception:
            log.exception("__transaction_state-%d write for %r raised", partition, tid)
            appended = ErrorCode.UNKNOWN_SERVER_ERROR
        took_s = time.monotonic() - started
        if took_s > SLOW_WRITE_S:
            # the id answered CONCURRENT_TRANSACTIONS all that time and could not time out
            log.warning(
                "__transaction_state-%d write for %r (%s) took %.1f s",
                partition,
                tid,
                written.state.label,
                took_s,
            )
        error = map_append_error(appended)
        if self._owned.get(partition) is not owned or self._closed:
            return ErrorCode.NOT_COORDINATOR
        now_meta = owned.cache.get(tid)
        if now_meta is None or now_meta.pending is not written.state:
            return ErrorCode.NOT_COORDINATOR
        if error is not ErrorCode.NONE:
            log.warning("__transaction_state-%d write for %r failed: %s", partition, tid, error)
            owned.cache[tid] = sm.write_failed(now_meta)
            return error
        transitions.debug(
            "%r: %s -> %s, producer %d epoch %d, %d partitions (__transaction_state-%d epoch %d)",
            tid,
            now_meta.state.label,
            written.state.label,
            written.producer_id,
            written.producer_epoch,
            len(written.partitions),
            partition,
            owned.coordinator_epoch,
        )
        if written.state is sm.TxnState.DEAD:
            del owned.cache[tid]
            return decision.error
        owned.cache[tid] = sm.write_succeeded(now_meta, written)
        if decision.markers:
            self._spawn(self._send_markers(partition, owned, tid))
        return decision.error

    async def _send_markers(self, partition: int, owned: _Owned, tid: str) -> None:
        """Markers for the Prepare* of ``tid``, then Complete*, while ``owned`` is this
        broker's ownership of the partition (at its current coordinator epoch)."""
        try:
            await self._send_markers_once(partition, owned, tid)
        except Exception:
            log.exception("markers of %r failed: it stays in Prepare* until a reload", tid)

    async def _send_markers_once(self, partition: int, owned: _Owned, tid: str) -> None:
        if self._owned.get(partition) is not owned:
            return
        coordinator_epoch = owned.coordinator_epoch
        meta = owned.cache.get(tid)
        if meta is None or meta.state not in _PREPARE:
            return

        def written(tp: TopicPartition) -> None:
            m = owned.cache.get(tid)
            if m is not None and m.state is meta.state and tp in m.partitions:
                owned.cache[tid] = sm.marker_written(m, tp)

        log.info(
            "writing %s markers of %r (producer %d epoch %d) to %d partitions",
            "COMMIT" if meta.state is sm.TxnState.PREPARE_COMMIT else "ABORT",
            tid,
            meta.producer_id,
            meta.producer_epoch,
            len(meta.partitions),
        )
        ok = await self._markers.write(
            partition,
            meta.producer_id,
            meta.producer_epoch,
            meta.state is sm.TxnState.PREPARE_COMMIT,
            coordinator_epoch,
            meta.partitions,
            written,
        )
        if not ok:
            log.info("markers of %r abandoned or cancelled: it stays in Prepare*", tid)
            return
        retrying = ErrorCode.NONE
        while not self._closed:
            if self._owned.get(partition) is not owned:
                return
            current = owned.cache.get(tid)
            if current is None or current.state is not meta.state:
                return
            error = await self._apply(partition, owned, sm.complete(current, self._now()))
            if error is not ErrorCode.COORDINATOR_NOT_AVAILABLE and (
                error is not ErrorCode.CONCURRENT_TRANSACTIONS
            ):
                if error is not ErrorCode.NONE:
                    log.warning("completing %r failed: %s", tid, error)
                return
            if error is not retrying:
                retrying = error
                log.info("completing %r: %s; retrying", tid, error.name)
            await asyncio.sleep(COMPLETE_RETRY_BACKOFF_S)

    async def _producer_id(self) -> int:
        if self._spare_pid is None:
            self._spare_pid = await self._allocate()
        return self._spare_pid

    # --- APIs ---------------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = sm.NO_PRODUCER_ID,
        producer_epoch: int = sm.NO_PRODUCER_EPOCH,
    ) -> InitResult:
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if sm.validate_timeout(timeout_ms, self._config) is not ErrorCode.NONE:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return InitResult(found)
        meta = found[2]
        need_pid = meta is None or sm.epoch_exhausted(meta.producer_epoch)
        spare = await self._producer_id() if need_pid else None
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return InitResult(found)
        partition, owned, meta = found
        used: list[int] = []

        def allocate() -> int:
            if spare is None or used:
                raise sm.IllegalTransition("a second producer id in one InitProducerId")
            used.append(spare)
            return spare

        decision = sm.init_producer_id(
            meta,
            transactional_id,
            timeout_ms,
            self._now(),
            allocate,
            self._config,
            expected_producer_id=producer_id,
            expected_epoch=producer_epoch,
        )
        if used:
            self._spare_pid = None
        error = await self._apply(partition, owned, decision)
        if error is not ErrorCode.NONE:
            return InitResult(error)
        return InitResult(ErrorCode.NONE, decision.producer_id, decision.producer_epoch)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        return await self._decide(
            transactional_id,
            lambda meta: sm.add_partitions(
                meta, transactional_id, producer_id, producer_epoch, partitions, self._now()
            ),
        )

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        return await self._decide(
            transactional_id,
            lambda meta: sm.add_offsets(
                meta,
                transactional_id,
                producer_id,
                producer_epoch,
                group_id,
                self._now(),
                self._config,
            ),
        )

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """KIP-890 verification: is each partition in the ongoing transaction?"""
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        return sm.verify_partitions(
            found[2], transactional_id, producer_id, producer_epoch, partitions
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        return await self._decide(
            transactional_id,
            lambda meta: sm.end_txn(
                meta, transactional_id, producer_id, producer_epoch, commit, self._now()
            ),
        )

    def describe(self, transactional_id: str) -> admin.DescribedTxn:
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode):
            if found is ErrorCode.NOT_COORDINATOR and not transactional_id:
                return admin.describe(transactional_id, None)
            return admin.DescribedTxn(transactional_id, found)
        return admin.describe(transactional_id, found[2])

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> tuple[ErrorCode, list[admin.ListedTxn], list[str]]:
        if any(o.loading for o in self._owned.values()):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        cache: dict[str, sm.TxnMetadata] = {}
        for owned in self._owned.values():
            cache.update(owned.cache)
        listed, unknown = admin.list_transactions(
            cache,
            self._now(),
            states=list(states),
            producer_ids=list(producer_ids),
            min_duration_ms=min_duration_ms,
        )
        return ErrorCode.NONE, listed, unknown

    # --- timers -------------------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Fence and abort every Ongoing transaction older than its timeout; how many."""
        now = self._now()
        count = 0
        for partition, owned in list(self._owned.items()):
            if owned.loading:
                continue
            for tid, meta in list(owned.cache.items()):
                decision = sm.abort_timed_out(meta, now)
                if decision is None:
                    continue
                log.info(
                    "aborting timed-out transaction of %r (producer %d epoch %d)",
                    tid,
                    meta.producer_id,
                    meta.producer_epoch,
                )
                count += 1
                self._spawn(self._write_logged(partition, owned, decision))
        return count

    async def expire_ids(self) -> int:
        """Tombstone every transactional id idle for ``transactional.id.expiration.ms``."""
        now = self._now()
        count = 0
        for partition, owned in list(self._owned.items()):
            if owned.loading:
                continue
            for meta in list(owned.cache.values()):
                decision = sm.expire(meta, now, self._config)
                if decision is None:
                    continue
                count += 1
                await self._write_logged(partition, owned, decision)
        return count

    async def _write_logged(self, partition: int, owned: _Owned, decision: sm.Decision) -> None:
        error = await self._apply(partition, owned, decision)
        if error is not ErrorCode.NONE:
            assert decision.current is not None
            tid = decision.current.transactional_id
            log.warning("coordinator write for %r failed: %s", tid, error)
