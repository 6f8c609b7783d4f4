"""The coordinator driver on the state machine: write-ahead with pending states, markers through
the channel then Complete*, append failures, loading (markers resent for Prepare*), unloading,
the timeout abort and id expiry. The store is in memory and the partition leaders are a fake
connection that records every WriteTxnMarkers and answers with scripted errors."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.txn.config import TxnCoordinatorConfig
from tierlog.server.txn.coordinator import TxnCoordinator
from tierlog.server.txn.load import load_records
from tierlog.server.txn.log_store import KeyValue
from tierlog.server.txn.markers import Destination, MarkerChannel, Unknown
from tierlog.server.txn.state import TxnState

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
LEADER = Destination(1, "leader", 9092)


class MemoryStore:
    def __init__(self) -> None:
        self.records: dict[int, list[KeyValue]] = {}
        self.fail_next: ErrorCode | None = None
        self.raise_next: Exception | None = None
        self.gate: asyncio.Event | None = None
        self.load_gate: asyncio.Event | None = None
        self.waiting = asyncio.Event()  # set once an append or a load waits at its gate

    async def append(
        self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int
    ) -> ErrorCode:
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        if self.fail_next is not None:
            code, self.fail_next = self.fail_next, None
            return code
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc
        self.records.setdefault(partition, []).append((key, value))
        return ErrorCode.NONE

    async def load(self, partition: int) -> list[KeyValue]:
        if self.load_gate is not None:
            self.waiting.set()
            await self.load_gate.wait()
        return list(self.records.get(partition, []))


class Leaders:
    """Every partition leader: records the markers, answers each partition with
    ``errors.pop(tp)`` if scripted, else NONE."""

    def __init__(self) -> None:
        self.markers: list[tuple[int, int, bool, int, TopicPartition]] = []
        self.errors: dict[TopicPartition, list[ErrorCode]] = {}
        self.down = False

    async def connect(self, dest: Destination) -> Any:
        if self.down:
            raise ConnectionRefusedError("down")
        return self

    async def close(self) -> None:
        return None

    async def call(self, api_key: ApiKey, version: int, timeout_s: float, **fields: Any) -> Any:
        assert api_key is ApiKey.WRITE_TXN_MARKERS
        if self.down:
            raise ConnectionResetError("down")
        results = []
        for m in fields["markers"]:
            topics = []
            for t in m["topics"]:
                parts = []
                for p in t["partition_indexes"]:
                    tp = TopicPartition(t["name"], p)
                    scripted = self.errors.get(tp)
                    code = scripted.pop(0) if scripted else ErrorCode.NONE
                    if code is ErrorCode.NONE:
                        self.markers.append(
                            (
                                m["producer_id"],
                                m["producer_epoch"],
                                m["transaction_result"],
                                m["coordinator_epoch"],
                                tp,
                            )
                        )
                    parts.append(SimpleNamespace(partition_index=p, error_code=code))
                topics.append(SimpleNamespace(name=t["name"], partitions=parts))
            results.append(SimpleNamespace(producer_id=m["producer_id"], topics=topics))
        return SimpleNamespace(markers=results)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Rig:
    def __init__(self, partitions: int = 1) -> None:
        self.store = MemoryStore()
        self.leaders = Leaders()
        self.clock = Clock()
        self.config = TxnCoordinatorConfig(
            state_log_num_partitions=partitions, id_expiration_ms=60_000
        )
        self.deleted: set[TopicPartition] = set()
        self.pids = itertools.count(5000)
        self.coordinator = self.new_coordinator()

    def new_coordinator(self) -> TxnCoordinator:
        def resolve(tp: TopicPartition) -> Destination | Unknown | None:
            return None if tp in self.deleted else LEADER

        async def allocate() -> int:
            return next(self.pids)

        return TxnCoordinator(
            config=self.config,
            store=self.store,
            markers=MarkerChannel(resolve, self.leaders.connect, retry_backoff_ms=1),
            allocate_producer_id=allocate,
            clock_ms=self.clock,
        )

    async def state_of(self, tid: str, state: TxnState, c: TxnCoordinator | None = None) -> None:
        coordinator = c or self.coordinator

        async def reached() -> None:
            while True:
                d = coordinator.describe(tid)
                if d.state == state.label:
                    return
                await asyncio.sleep(0.001)

        await asyncio.wait_for(reached(), 5)


def run(body: Callable[[Rig], Awaitable[None]], partitions: int = 1) -> None:
    async def main() -> None:
        rig = Rig(partitions)
        for p in range(partitions):
            await rig.coordinator.load(p, 3)
        try:
            await body(rig)
        finally:
            await rig.coordinator.close()

    asyncio.run(main())


def test_commit_writes_prepare_markers_then_complete() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        init = await c.init_producer_id("a", 30_000)
        assert (init.error, init.producer_epoch) == (ErrorCode.NONE, 0)
        pid = init.producer_id
        assert await c.add_partitions("a", pid, 0, [TP0, TP1]) is ErrorCode.NONE
        assert await c.end_txn("a", pid, 0, True) is ErrorCode.NONE
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        assert sorted(rig.leaders.markers, key=str) == [
            (pid, 0, True, 3, TP0),
            (pid, 0, True, 3, TP1),
        ]
        states = [m.state for m in _history(rig, "a")]
        assert states == [
            TxnState.EMPTY,
            TxnState.ONGOING,
            TxnState.PREPARE_COMMIT,
            TxnState.COMPLETE_COMMIT,
        ]

    run(body)


def _history(rig: Rig, tid: str) -> list[Any]:
    out = []
    for key, value in rig.store.records.get(0, []):
        cache = load_records([(key, value)])
        if tid in cache:
            out.append(cache[tid])
    return out


def test_retriable_marker_errors_are_retried_and_deleted_partitions_dropped() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        gone = TopicPartition("gone", 0)
        assert await c.add_partitions("a", pid, 0, [TP0, TP1, gone]) is ErrorCode.NONE
        rig.leaders.errors[TP0] = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT]
        rig.deleted.add(gone)
        assert await c.end_txn("a", pid, 0, False) is ErrorCode.NONE
        assert (await c.init_producer_id("a", 30_000)).error is ErrorCode.CONCURRENT_TRANSACTIONS
        await rig.state_of("a", TxnState.COMPLETE_ABORT)
        assert {m[4] for m in rig.leaders.markers} == {TP0, TP1}

    run(body)


def test_markers_survive_a_broker_that_is_down_for_a_while() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NONE
        rig.leaders.down = True
        assert await c.end_txn("a", pid, 0, True) is ErrorCode.NONE
        await asyncio.sleep(0.05)
        assert c.describe("a").state == "PrepareCommit"
        assert c.describe("a").partitions == (TP0,)
        assert await c.add_partitions("a", pid, 0, [TP1]) is ErrorCode.CONCURRENT_TRANSACTIONS
        rig.leaders.down = False
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)

    run(body)


def test_fenced_marker_abandons_the_transaction() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        assert await c.add_partitions("a", pid, 0, [TP0, TP1]) is ErrorCode.NONE
        rig.leaders.errors[TP0] = [ErrorCode.TRANSACTION_COORDINATOR_FENCED]
        assert await c.end_txn("a", pid, 0, True) is ErrorCode.NONE
        await asyncio.sleep(0.05)
        assert c.describe("a").state == "PrepareCommit"

    run(body)


def test_a_pending_write_makes_others_wait_and_a_failed_write_is_forgotten() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        rig.store.gate = asyncio.Event()
        adding = asyncio.ensure_future(c.add_partitions("a", pid, 0, [TP0]))
        await asyncio.wait_for(rig.store.waiting.wait(), 10)
        assert await c.end_txn("a", pid, 0, True) is ErrorCode.CONCURRENT_TRANSACTIONS
        rig.store.fail_next = ErrorCode.NOT_ENOUGH_REPLICAS
        rig.store.gate.set()
        assert await adding is ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert c.describe("a").state == "Empty"
        rig.store.fail_next = ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NOT_COORDINATOR
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NONE

    run(body)


def test_reload_resends_markers_of_prepared_transactions_at_the_new_epoch() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NONE
        rig.leaders.down = True
        assert await c.end_txn("a", pid, 0, False) is ErrorCode.NONE
        c.unload(0)
        assert (await c.init_producer_id("a", 30_000)).error is ErrorCode.NOT_COORDINATOR
        rig.leaders.down = False
        other = rig.new_coordinator()
        try:
            await other.load(0, 4)
            await rig.state_of("a", TxnState.COMPLETE_ABORT, other)
            assert rig.leaders.markers == [(pid, 0, False, 4, TP0)]
            # the reloaded id forgot its last epoch but keeps its producer id and epoch
            init = await other.init_producer_id("a", 30_000)
            assert (init.producer_id, init.producer_epoch) == (pid, 1)
        finally:
            await other.close()

    run(body)


def test_timed_out_transaction_is_fenced_and_aborted() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 1_000)).producer_id
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NONE
        assert await c.abort_timed_out() == 0
        rig.clock.now += 1_001
        assert await c.abort_timed_out() == 1
        await rig.state_of("a", TxnState.COMPLETE_ABORT)
        assert rig.leaders.markers == [(pid, 1, False, 3, TP0)]
        assert await c.end_txn("a", pid, 0, True) is ErrorCode.PRODUCER_FENCED
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.PRODUCER_FENCED

    run(body)


def test_idle_ids_expire_with_a_tombstone() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 1_000)).producer_id
        await c.init_producer_id("b", 1_000)
        rig.clock.now += 30_000
        pid_b = c.describe("b").producer_id
        assert await c.add_partitions("b", pid_b, 0, [TP0]) is ErrorCode.NONE
        rig.clock.now += 40_000
        assert await c.expire_ids() == 1
        assert c.describe("a").error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert rig.store.records[0][-1][1] is None
        assert await c.end_txn("a", pid, 0, True) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
        again = await c.init_producer_id("a", 1_000)
        assert again.producer_id != pid and again.producer_epoch == 0

    run(body)


def test_ids_are_served_only_by_their_partition_owner() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        tid = next(t for t in (f"id-{i}" for i in range(100)) if c.partition_for(t) == 1)
        assert (await c.init_producer_id(tid, 1_000)).error is ErrorCode.NONE
        c.unload(1)
        assert (await c.init_producer_id(tid, 1_000)).error is ErrorCode.NOT_COORDINATOR
        assert c.list_transactions()[0] is ErrorCode.NONE
        loading = asyncio.Event()
        rig.store.load_gate = loading
        task = asyncio.ensure_future(c.load(1, 5))
        await asyncio.wait_for(rig.store.waiting.wait(), 10)
        assert (await c.init_producer_id(tid, 1_000)).error is (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        )
        assert c.list_transactions()[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        loading.set()
        await task
        assert (await c.init_producer_id(tid, 1_000)).producer_epoch == 1

    run(body, partitions=2)


@pytest.mark.parametrize("bound", [1, 3])
def test_a_full_destination_queue_only_delays_completion(bound: int) -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        c._markers = MarkerChannel(
            lambda tp: LEADER, rig.leaders.connect, queue_bound=bound, retry_backoff_ms=1
        )
        parts = [TopicPartition("t", i) for i in range(8)]
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        assert await c.add_partitions("a", pid, 0, parts) is ErrorCode.NONE
        assert await c.end_txn("a", pid, 0, True) is ErrorCode.NONE
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        assert {m[4] for m in rig.leaders.markers} == set(parts)

    run(body)


def _channel(rig: Rig, resolve: Callable[[TopicPartition], Destination | Unknown | None]) -> None:
    rig.coordinator._markers = MarkerChannel(resolve, rig.leaders.connect, retry_backoff_ms=1)


async def _commit(rig: Rig, parts: list[TopicPartition]) -> int:
    c = rig.coordinator
    pid = (await c.init_producer_id("a", 30_000)).producer_id
    assert await c.add_partitions("a", pid, 0, parts) is ErrorCode.NONE
    assert await c.end_txn("a", pid, 0, True) is ErrorCode.NONE
    return pid


def test_a_sender_survives_an_unexpected_error_and_its_markers_are_resent() -> None:
    async def body(rig: Rig) -> None:
        calls = 0
        real_call = rig.leaders.call

        async def call(api_key: ApiKey, version: int, timeout_s: float, **fields: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise ValueError("undecodable response")
            return await real_call(api_key, version, timeout_s, **fields)

        rig.leaders.call = call  # type: ignore[method-assign]
        await _commit(rig, [TP0, TP1])
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        assert {m[4] for m in rig.leaders.markers} == {TP0, TP1}

    run(body)


def test_a_failing_resolver_delays_markers_but_never_loses_them() -> None:
    async def body(rig: Rig) -> None:
        failures = {TP0: 3}

        def resolve(tp: TopicPartition) -> Destination | Unknown | None:
            if failures.get(tp, 0) > 0:
                failures[tp] -= 1
                raise KeyError("broker re-registering")
            return LEADER

        _channel(rig, resolve)
        await _commit(rig, [TP0, TP1])
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        assert {m[4] for m in rig.leaders.markers} == {TP0, TP1}

    run(body)


def test_a_marker_waits_for_its_leader_to_come_back(caplog: pytest.LogCaptureFixture) -> None:
    """The leader of TP0 is dead (no endpoint), then restarts: the marker is resolved afresh,
    reaches it, the reason is logged once, and the transaction completes."""

    async def body(rig: Rig) -> None:
        restarted = asyncio.Event()

        def resolve(tp: TopicPartition) -> Destination | Unknown | None:
            if tp == TP0 and not restarted.is_set():
                return Unknown.ENDPOINT
            return LEADER

        _channel(rig, resolve)
        await _commit(rig, [TP0, TP1])
        await asyncio.sleep(0.05)
        assert rig.coordinator.describe("a").state == "PrepareCommit"
        restarted.set()
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        assert {m[4] for m in rig.leaders.markers} == {TP0, TP1}

    with caplog.at_level("INFO", logger="tierlog.server.txn.markers"):
        run(body)
    waits = [r for r in caplog.records if "leader is not known" in r.getMessage()]
    assert len(waits) == 1


def test_a_sender_that_ended_is_replaced_and_its_queue_drained() -> None:
    async def body(rig: Rig) -> None:
        channel = rig.coordinator._markers
        await _commit(rig, [TP0])
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        sender = channel._senders[LEADER]
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        pid = (await rig.coordinator.init_producer_id("a", 30_000)).producer_id
        assert await rig.coordinator.add_partitions("a", pid, 1, [TP1]) is ErrorCode.NONE
        assert await rig.coordinator.end_txn("a", pid, 1, False) is ErrorCode.NONE
        await rig.state_of("a", TxnState.COMPLETE_ABORT)
        assert (pid, 1, False, 3, TP1) in rig.leaders.markers

    run(body)


def test_a_round_stuck_past_its_timeout_is_retried() -> None:
    async def body(rig: Rig) -> None:
        stuck = asyncio.Event()
        real_call = rig.leaders.call

        async def call(api_key: ApiKey, version: int, timeout_s: float, **fields: Any) -> Any:
            if not stuck.is_set():
                stuck.set()
                await asyncio.Event().wait()
            return await real_call(api_key, version, timeout_s, **fields)

        rig.leaders.call = call  # type: ignore[method-assign]
        rig.coordinator._markers = MarkerChannel(
            lambda tp: LEADER, rig.leaders.connect, retry_backoff_ms=1, request_timeout_s=0.05
        )
        await _commit(rig, [TP0])
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        assert stuck.is_set()

    run(body)


def test_a_sender_replaces_a_connection_left_idle_past_its_limit() -> None:
    """A round after the sender's connection sat unused past ``connection_max_idle_s`` makes
    a new connection (and closes the old one) instead of failing on one the peer closed;
    rounds within the limit reuse it."""

    async def body(rig: Rig) -> None:
        connects: list[object] = []
        closed: list[object] = []

        class Conn:
            async def call(
                self, api_key: ApiKey, version: int, timeout_s: float, **fields: Any
            ) -> Any:
                return await rig.leaders.call(api_key, version, timeout_s, **fields)

            async def close(self) -> None:
                closed.append(self)

        async def connect(dest: Destination) -> Any:
            conn = Conn()
            connects.append(conn)
            return conn

        for max_idle_s, rounds_per_connection in ((3600.0, 2), (0.0, 1)):
            connects.clear()
            closed.clear()
            channel = MarkerChannel(
                lambda tp: LEADER, connect, retry_backoff_ms=1, connection_max_idle_s=max_idle_s
            )
            for pid in (1, 2):
                assert await channel.write(0, pid, 0, True, 3, [TP0])
            await channel.close()
            assert len(connects) == 2 // rounds_per_connection
            assert closed == connects  # the idle one at once, the last at close

    run(body)


def test_a_request_cancelled_during_its_write_still_applies_the_write() -> None:
    """A client that disconnects mid-EndTxn cancels its request; the write it started lands
    all the same, so the id is not left pending (CONCURRENT_TRANSACTIONS) for ever."""

    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NONE
        rig.store.gate = asyncio.Event()
        ending = asyncio.ensure_future(c.end_txn("a", pid, 0, True))
        await asyncio.wait_for(rig.store.waiting.wait(), 10)
        ending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ending
        rig.store.gate.set()
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)
        assert rig.leaders.markers == [(pid, 0, True, 3, TP0)]
        again = await c.init_producer_id("a", 30_000)
        assert (again.error, again.producer_epoch) == (ErrorCode.NONE, 1)

    run(body)


def test_a_write_that_raises_is_forgotten_rather_than_left_pending() -> None:
    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        rig.store.raise_next = OSError("disk gone")
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.UNKNOWN_SERVER_ERROR
        assert c.describe("a").state == "Empty"
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NONE

    run(body)


def test_a_second_request_issued_before_the_first_write_starts_sees_it_pending() -> None:
    """The decision is installed when it is taken, not when its write's task first runs: an
    EndTxn issued in the same loop turn as another answers CONCURRENT_TRANSACTIONS instead of
    deciding from the state the first one replaced, which would leave the first write's outcome
    unrecognised (NOT_COORDINATOR) and its markers unsent."""

    async def body(rig: Rig) -> None:
        c = rig.coordinator
        pid = (await c.init_producer_id("a", 30_000)).producer_id
        assert await c.add_partitions("a", pid, 0, [TP0]) is ErrorCode.NONE
        first, second = await asyncio.gather(
            c.end_txn("a", pid, 0, True), c.end_txn("a", pid, 0, True)
        )
        assert (first, second) == (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS)
        await rig.state_of("a", TxnState.COMPLETE_COMMIT)

    run(body)
