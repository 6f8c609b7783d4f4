"""A follower's fetcher: one task per (leader broker, fetcher id) on the event loop
(Kafka's ``ReplicaFetcherThread``; spec/kafka-replication.md §4).

Each partition the fetcher serves has a fetch state (F-3). Every new leader epoch re-adds
it (F-4, KAFKA-7164) **fetching** from its LEO when its log has a leader epoch, with that
epoch as ``last_fetched_epoch``: the leader checks it against its own epochs before it sends
anything, and a log that diverged gets ``diverging_epoch`` instead of records and truncates
to it (truncation on fetch, Kafka 2.7+, §4.3), so a follower never appends to a log that
may have diverged. A log without an epoch is **truncating**: it truncates to its high
watermark (OffsetForLeaderEpoch answers, when one is asked, are applied the same way). Each
loop handles the truncating partitions, then sends one Fetch (``replica_id`` = this
broker, ``replica.fetch.*``) for the fetching ones. Answers are applied only if the
partition is still there at the epoch and offset asked (F-5, checklist 30). The leader's
high watermark is applied clamped to the LEO (F-8, checklist 33).

OFFSET_MOVED_TO_TIERED_STORAGE (the leader holds our fetch offset only in the remote tier)
puts the partition in a third state, **building auxiliary state**: its log restarts at the
leader's local log start with the epoch cache and producer state read from the remote tier
(``replication.aux_state``, KIP-405), and fetching resumes there.

OFFSET_OUT_OF_RANGE resets the fetch position as F-11 says (ListOffsets LATEST, then
EARLIEST, to the leader). Other errors (table of §4.2): FENCED_LEADER_EPOCH at the current
epoch marks the partition failed until a new state re-adds it (F-6); the rest back it off
for ``replica.fetch.backoff.ms``; a failed request backs off every partition of the fetcher;
a failing append fails only its partition (checklist 32).
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tierlog.log import PartitionLog
from tierlog.log.leader_epoch import UNDEFINED_EPOCH
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.replication.aux_state import RemoteAuxStateSource, build_aux_state
from tierlog.replication.quota import ReplicationQuota
from tierlog.replication.wire import BrokerConnection

log = logging.getLogger(__name__)

FETCH_VERSION = 12
EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 9
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class Phase(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    BUILDING_AUX_STATE = "building-aux-state"
    """Answered OFFSET_MOVED_TO_TIERED_STORAGE: restarting the log from the remote tier's
    state (``replication.aux_state``) before fetching again."""


@dataclass
class FetchState:
    topic: str
    index: int
    log: PartitionLog
    leader_epoch: int
    phase: Phase = Phase.TRUNCATING
    failed: bool = False
    delay_until: float = 0.0
    leader_hw: int | None = None
    """The leader's high watermark in its last answer (None before any): a follower whose
    log end has reached it is in sync, which the follower throttle never slows."""
    last_error: int = 0
    """The error the partition was backed off for since its last successful fetch (logged
    when it changes, so a partition a leader keeps refusing is not silent)."""

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index


@dataclass(frozen=True)
class FetcherSettings:
    broker_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partition_max_bytes: int
    backoff_ms: int
    request_timeout_s: float = 30.0
    fetch_last_tiered_offset: bool = False
    """KIP-1023 (``follower.fetch.last.tiered.offset.enable``): an empty follower of a
    tiered partition starts after the leader's last tiered offset."""


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader (per fetcher id).

    ``endpoint`` returns the leader's (host, port), or None while it is not live.
    ``on_appended`` runs after an append or HW change of a partition (the manager wakes
    waiters)."""

    def __init__(
        self,
        leader_id: int,
        fetcher_id: int,
        settings: FetcherSettings,
        endpoint: Callable[[], tuple[str, int] | None],
        on_appended: Callable[[tuple[str, int]], None],
        aux_source: RemoteAuxStateSource | None = None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.leader_id = leader_id
        self.quota = quota
        """The follower replication throttle: throttled partitions not in sync are left out
        of a Fetch while it is exceeded, and their bytes are recorded."""
        self.aux_source = aux_source
        """The remote tier for followers behind the leader's local log start (tiered
        storage on); without it such a partition backs off."""
        self.fetcher_id = fetcher_id
        self.settings = settings
        self._endpoint = endpoint
        self._on_appended = on_appended
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._wake = asyncio.Event()
        self._conn: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    # ---- membership ----------------------------------------------------------------------
    def add(self, topic: str, index: int, plog: PartitionLog, leader_epoch: int) -> None:
        """(Re)add a partition at a leader epoch; the same epoch keeps its state (F-4)."""
        current = self.partitions.get((topic, index))
        if current is not None and current.leader_epoch == leader_epoch and not current.failed:
            return
        has_epoch = plog.leader_epoch_cache.latest_epoch() is not None
        phase = Phase.FETCHING if has_epoch else Phase.TRUNCATING
        self.partitions[(topic, index)] = FetchState(topic, index, plog, leader_epoch, phase)
        self._wake.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop the task and close the connection. The task is cancelled until it is done:
        ``asyncio.wait_for`` can swallow a cancellation that races with its inner result
        (CPython gh-86296), and the loop also stops at its next turn once closing."""
        self._closing = True
        task = self._task
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        await self._disconnect()

    # ---- the loop ------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self.settings.backoff_ms / 1000
        while not self._closing:
            now = time.monotonic()
            ready = [s for s in self.partitions.values() if not s.failed and s.delay_until <= now]
            if not ready:
                self._wake.clear()
                delays = [s.delay_until - now for s in self.partitions.values() if not s.failed]
                timeout = min(delays) if delays else None
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass
                continue
            try:
                conn = await self._connection()
                truncating = [s for s in ready if s.phase is Phase.TRUNCATING]
                if truncating:
                    await self._truncate(conn, truncating)
                fetching = [
                    s
                    for s in ready
                    if s.phase is Phase.FETCHING and not s.failed and not self._throttled(s)
                ]
                if fetching:
                    await self._fetch(conn, fetching)
                elif not truncating:
                    # every ready partition is throttled: look again after a back-off, as
                    # Kafka's fetcher does with nothing to fetch
                    until = time.monotonic() + backoff
                    for s in ready:
                        s.delay_until = until
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.info("fetcher for leader %d: %r; backing off", self.leader_id, e)
                await self._disconnect()
                until = time.monotonic() + backoff
                for s in ready:
                    s.delay_until = until

    async def _connection(self) -> BrokerConnection:
        if self._conn is None:
            endpoint = self._endpoint()
            if endpoint is None:
                raise ConnectionError(f"leader {self.leader_id} is not live")
            self._conn = await BrokerConnection.open(
                *endpoint,
                client_id=f"replica-fetcher-{self.settings.broker_id}",
                timeout_s=self.settings.request_timeout_s,
            )
        return self._conn

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _throttled(self, s: FetchState) -> bool:
        """Kafka's ``shouldFollowerThrottle``: not in sync, throttled, quota exceeded."""
        quota = self.quota
        in_sync = s.leader_hw is not None and s.log.log_end_offset >= s.leader_hw
        return (
            quota is not None
            and not in_sync
            and quota.is_throttled(s.topic, s.index)
            and quota.is_exceeded()
        )

    def _current(self, s: FetchState, epoch: int) -> bool:
        return self.partitions.get(s.key) is s and s.leader_epoch == epoch and not s.failed

    def _back_off(self, s: FetchState, code: int) -> None:
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s-%d: fenced at epoch %d; waiting for new state", *s.key, s.leader_epoch)
            s.failed = True
            return
        if code != s.last_error:
            s.last_error = code
            log.info(
                "%s-%d: leader %d answers %s at epoch %d; retrying every %d ms",
                *s.key,
                self.leader_id,
                _error_name(code),
                s.leader_epoch,
                self.settings.backoff_ms,
            )
        s.delay_until = time.monotonic() + self.settings.backoff_ms / 1000

    # ---- truncation (§4.3) ---------------------------------------------------------------
    async def _truncate(self, conn: BrokerConnection, states: list[FetchState]) -> None:
        asked: dict[tuple[str, int], tuple[FetchState, int, int]] = {}
        topics: dict[str, list[dict[str, Any]]] = {}
        for s in states:
            latest = s.log.leader_epoch_cache.latest_epoch()
            if latest is None:
                self._truncated(s, s.log.high_watermark)
                if self._empty(s) and self.settings.fetch_last_tiered_offset:
                    await self._start_after_last_tiered(conn, s)
                continue
            asked[s.key] = (s, s.leader_epoch, latest)
            topics.setdefault(s.topic, []).append(
                {
                    "partition": s.index,
                    "current_leader_epoch": s.leader_epoch,
                    "leader_epoch": latest,
                }
            )
        if not topics:
            return
        response = await conn.call(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            EPOCH_VERSION,
            self.settings.request_timeout_s,
            replica_id=self.settings.broker_id,
            topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
        )
        for t in response.topics:
            for p in t.partitions:
                entry = asked.get((t.topic, int(p.partition)))
                if entry is None:
                    continue
                s, epoch, _asked = entry
                if not self._current(s, epoch):
                    continue
                if int(p.error_code) != 0:
                    self._back_off(s, int(p.error_code))
                    continue
                self._apply_epoch_answer(s, int(p.leader_epoch), int(p.end_offset))

    def _apply_epoch_answer(self, s: FetchState, leader_epoch: int, end_offset: int) -> None:
        """Truncate to where the leader's ``(epoch, end offset)`` says our log diverges, from
        an OffsetForLeaderEpoch answer or a Fetch's ``diverging_epoch`` (§4.3 step 4). When
        we never held that epoch we truncate to our own end of the epoch below it; the next
        Fetch carries the new ``last_fetched_epoch``, and the leader checks again."""
        plog = s.log
        leo = plog.log_end_offset
        if end_offset == -1:
            self._truncated(s, plog.high_watermark)
            return
        if leader_epoch == UNDEFINED_EPOCH:
            self._truncated(s, min(end_offset, leo))
            return
        own_epoch, own_end = plog.leader_epoch_cache.end_offset_for(leader_epoch, leo)
        if own_epoch == UNDEFINED_EPOCH:
            self._truncated(s, min(end_offset, leo))
        elif own_epoch != leader_epoch:
            self._truncated(s, min(own_end, leo))
        else:
            self._truncated(s, min(own_end, end_offset, leo))

    @staticmethod
    def _truncated(s: FetchState, offset: int) -> None:
        """Truncation on fetch: the state is fetching afterwards even when the leader's
        answer was for an epoch we never held (Kafka with ``isTruncationOnFetchSupported``)."""
        s.log.truncate_to(offset)
        s.phase = Phase.FETCHING

    # ---- fetching (§4.2) -----------------------------------------------------------------
    async def _fetch(self, conn: BrokerConnection, states: list[FetchState]) -> None:
        cfg = self.settings
        asked: dict[tuple[str, int], tuple[FetchState, int, int]] = {}
        topics: dict[str, list[dict[str, Any]]] = {}
        for s in states:
            offset = s.log.log_end_offset
            last_fetched = s.log.leader_epoch_cache.latest_epoch()
            asked[s.key] = (s, s.leader_epoch, offset)
            topics.setdefault(s.topic, []).append(
                {
                    "partition": s.index,
                    "current_leader_epoch": s.leader_epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1 if last_fetched is None else last_fetched,
                    "log_start_offset": s.log.log_start_offset,
                    "partition_max_bytes": cfg.partition_max_bytes,
                }
            )
        response = await conn.call(
            ApiKey.FETCH,
            FETCH_VERSION,
            cfg.request_timeout_s + cfg.max_wait_ms / 1000,
            replica_id=cfg.broker_id,
            max_wait=datetime.timedelta(milliseconds=cfg.max_wait_ms),
            min_bytes=cfg.min_bytes,
            max_bytes=cfg.max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        if int(response.error_code) != 0:
            raise ConnectionError(f"fetch failed: {ErrorCode(int(response.error_code)).name}")
        for t in response.responses:
            for p in t.partitions:
                entry = asked.get((t.topic, int(p.partition_index)))
                if entry is None:
                    continue
                s, epoch, offset = entry
                if not self._current(s, epoch) or s.log.log_end_offset != offset:
                    continue
                code = int(p.error_code)
                diverging = p.diverging_epoch
                if code == 0 and (diverging.epoch != -1 or diverging.end_offset != -1):
                    # no append and no HW from this answer (Kafka's
                    # testTruncateOnFetchDoesNotProcessPartitionData)
                    self._apply_epoch_answer(s, int(diverging.epoch), int(diverging.end_offset))
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._reset_out_of_range(conn, s, epoch)
                elif code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                    await self._build_aux_state(conn, s, epoch, int(p.log_start_offset))
                elif code != 0:
                    self._back_off(s, code)
                else:
                    self._append(s, p.records, int(p.high_watermark), int(p.log_start_offset))

    # ---- out of range (F-11) ---------------------------------------------------------------
    async def _reset_out_of_range(self, conn: BrokerConnection, s: FetchState, epoch: int) -> None:
        """The leader has no data at our LEO: a leader behind us (after an unclean election)
        means truncating to its end; a leader whose log starts above our LEO means
        restarting our log at its start. Otherwise we keep fetching from our LEO."""
        latest = await self._list_offset(conn, s, -1)
        if latest is None or not self._current(s, epoch):
            return
        leo = s.log.log_end_offset
        if latest < leo:
            s.log.truncate_to(latest)
            return
        earliest = await self._list_offset(conn, s, -2)
        if earliest is None or not self._current(s, epoch):
            return
        if earliest > s.log.log_end_offset:
            s.log.truncate_fully_and_start_at(earliest)

    # ---- building auxiliary state from the remote tier (KIP-405) -----------------------------
    async def _build_aux_state(
        self, conn: BrokerConnection, s: FetchState, epoch: int, leader_log_start: int
    ) -> None:
        """OFFSET_MOVED_TO_TIERED_STORAGE: restart the log where the leader's local log
        starts, with the epoch cache and producer state read from the remote tier
        (``replication.aux_state``); never the tiered records themselves."""
        source = self.aux_source
        if source is None:
            log.warning("%s-%d: the leader's data is tiered but tiering is off here", *s.key)
            self._back_off(s, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE)
            return
        s.phase = Phase.BUILDING_AUX_STATE

        async def earliest_local() -> tuple[int, int] | None:
            return await self._list_offset_and_epoch(conn, s, EARLIEST_LOCAL)

        async def epoch_end(asked: int) -> tuple[int, int] | None:
            return await self._epoch_end(conn, s, asked)

        try:
            start = await build_aux_state(
                s.log, source, leader_log_start, earliest_local, epoch_end
            )
        except Exception as e:
            log.info("%s-%d: building state from the remote tier failed: %r", *s.key, e)
            s.phase = Phase.FETCHING
            self._back_off(s, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE)
            return
        if start is not None and self._current(s, epoch):
            log.info("%s-%d: bootstrapped from the remote tier; fetching from %d", *s.key, start)
        s.phase = Phase.FETCHING

    @staticmethod
    def _empty(s: FetchState) -> bool:
        return s.log.log_end_offset == s.log.log_start_offset == 0

    async def _start_after_last_tiered(self, conn: BrokerConnection, s: FetchState) -> None:
        """KIP-1023: an empty follower starts after the leader's last tiered offset (its
        state built from the segment ending there) rather than fetching the local part of
        the leader's log that is already remote. Without tiered data it fetches from 0; when
        the remote tier cannot answer yet it tries again after the back-off."""
        source = self.aux_source
        if source is None or s.phase is not Phase.FETCHING:
            return
        last = await self._list_offset_and_epoch(conn, s, LATEST_TIERED)
        if last is None or last[0] < 0 or last[1] < 0:
            return
        tiered, epoch = last
        leader_start = await self._list_offset(conn, s, -2)
        if leader_start is None:
            return

        async def after_last_tiered() -> tuple[int, int]:
            return tiered + 1, epoch

        async def epoch_end(asked: int) -> tuple[int, int] | None:
            return await self._epoch_end(conn, s, asked)

        s.phase = Phase.BUILDING_AUX_STATE
        try:
            start = await build_aux_state(s.log, source, leader_start, after_last_tiered, epoch_end)
        except Exception as e:
            log.info("%s-%d: starting after the last tiered offset failed: %r", *s.key, e)
            s.phase = Phase.TRUNCATING  # tried again after the back-off, as Kafka does
            self._back_off(s, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE)
            return
        if start is not None:
            log.info("%s-%d: empty follower starts after the last tiered offset", *s.key)
        s.phase = Phase.FETCHING

    async def _epoch_end(
        self, conn: BrokerConnection, s: FetchState, asked: int
    ) -> tuple[int, int] | None:
        response = await conn.call(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            EPOCH_VERSION,
            self.settings.request_timeout_s,
            replica_id=self.settings.broker_id,
            topics=[
                {
                    "topic": s.topic,
                    "partitions": [
                        {
                            "partition": s.index,
                            "current_leader_epoch": s.leader_epoch,
                            "leader_epoch": asked,
                        }
                    ],
                }
            ],
        )
        p = response.topics[0].partitions[0]
        if int(p.error_code) != 0:
            self._back_off(s, int(p.error_code))
            return None
        return int(p.leader_epoch), int(p.end_offset)

    async def _list_offset(self, conn: BrokerConnection, s: FetchState, ts: int) -> int | None:
        """The leader's offset for a special timestamp, fenced by our epoch; None after an
        error (the partition is backed off)."""
        got = await self._list_offset_and_epoch(conn, s, ts)
        return None if got is None else got[0]

    async def _list_offset_and_epoch(
        self, conn: BrokerConnection, s: FetchState, ts: int
    ) -> tuple[int, int] | None:
        response = await conn.call(
            ApiKey.LIST_OFFSETS,
            LIST_OFFSETS_VERSION,
            self.settings.request_timeout_s,
            replica_id=self.settings.broker_id,
            isolation_level=0,
            topics=[
                {
                    "name": s.topic,
                    "partitions": [
                        {
                            "partition_index": s.index,
                            "current_leader_epoch": s.leader_epoch,
                            "timestamp": ts,
                        }
                    ],
                }
            ],
        )
        p = response.topics[0].partitions[0]
        if int(p.error_code) != 0:
            self._back_off(s, int(p.error_code))
            return None
        return int(p.offset), int(p.leader_epoch)

    def _append(self, s: FetchState, records: Any, leader_hw: int, leader_start: int) -> None:
        """F-7, F-8: append, take the leader's HW (clamped, not maxed) and its log start
        once our HW has reached it."""
        try:
            if records:
                data = bytes(records)
                s.log.append_as_follower(data)
                if self.quota is not None and self.quota.is_throttled(s.topic, s.index):
                    self.quota.record(len(data))
            s.leader_hw = leader_hw
            hw = s.log.set_high_watermark(leader_hw)
            if s.log.log_start_offset < leader_start <= hw:
                s.log.delete_records(leader_start)
        except Exception:
            log.exception("%s-%d: follower append failed; partition stopped", *s.key)
            s.failed = True
            return
        s.last_error = 0
        self._on_appended(s.key)
