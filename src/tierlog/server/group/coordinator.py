"""The asyncio side of the group coordinator: futures, timers and persistence.

Every decision is made by ``state.Group``; this class only (1) turns a waiting JoinGroup or
SyncGroup into a future that the state machine's outcome resolves, (2) keeps one
``loop.call_later`` timer per group armed at the group's next deadline, and (3) writes the
records the state machine asks for to ``__consumer_offsets`` through an ``OffsetsStore``.
All of it runs on the event loop thread: there are no locks around group state because no
code path awaits between reading a group and acting on what it read, except the writes,
which re-check the group afterwards.

Which groups this broker coordinates is decided per ``__consumer_offsets`` partition. A
single node owns every partition and loads them all in ``start``. In cluster mode the
coordinator is a ``LeadershipListener`` of that topic: ``became_leader`` loads the
partition's groups in the background (their requests answer COORDINATOR_LOAD_IN_PROGRESS
until it is done), ``became_follower`` and ``stopped`` drop them (requests answer
NOT_COORDINATOR, and waiting joins and syncs are answered NOT_COORDINATOR at once), and
``placement`` tells FindCoordinator which broker leads a partition. A write checks
afterwards that the partition is still owned by the load it started under (a re-election of
this broker at a higher epoch keeps the ownership; a resignation in between does not).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.config import GroupCoordinatorConfig
from tierlog.server.group.model import (
    NO_LEADER_EPOCH,
    NO_OFFSET,
    CoordinatorEntry,
    CoordinatorKeyType,
    DeletedGroup,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FetchedOffset,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeletePartitionResult,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchGroup,
    OffsetFetchGroupResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)
from tierlog.server.group.placement import CoordinatorPlacement
from tierlog.server.group.schema import (
    OFFSETS_TOPIC,
    CommittedOffset,
    GroupRecord,
    OffsetKey,
    SchemaError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    offset_key,
    offset_value,
    partition_for,
)
from tierlog.server.group.state import DEAD, EMPTY, Group, check_join_request
from tierlog.server.group.store import KeyValue, OffsetsStore, OffsetsStoreError
from tierlog.server.group.txn_offsets import PendingTxnOffsets
from tierlog.server.owned_writes import OwnedWrites

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Kinds of ``__consumer_offsets`` writes, whose failures Kafka answers differently.
_COMMIT = "commit"
_GROUP_METADATA = "group"
_TOMBSTONES = "tombstones"


@dataclass(frozen=True, slots=True)
class CoordinatorNode:
    """This broker, as FindCoordinator reports it: a single node coordinates every group."""

    node_id: int
    host: str
    port: int


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupCoordinator:
    """Kafka's classic group coordinator for one broker. Call ``start`` before serving."""

    def __init__(
        self,
        *,
        node: CoordinatorNode,
        store: OffsetsStore,
        config: GroupCoordinatorConfig | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        partition_exists: Callable[[str, int], bool] | None = None,
        placement: CoordinatorPlacement | None = None,
    ) -> None:
        self._node = node
        self._store = store
        self._config = config or GroupCoordinatorConfig()
        self._now = clock_ms
        self._partition_exists = partition_exists
        self._placement = placement
        self._groups: dict[str, Group] = {}
        self._owned: dict[int, int] = {}
        """Loaded ``__consumer_offsets`` partitions -> the load generation that owns them."""
        self._loading: dict[int, tuple[int, int]] = {}
        """Partitions being loaded -> (load generation, leader epoch)."""
        self._markers_while_loading: dict[int, list[tuple[int, bool, int]]] = {}
        """Partition being loaded -> markers written to it meanwhile: (producer id, committed,
        offset). The load may have read past some; the others are applied when it ends."""
        self._waiting_group: dict[int, str] = {}
        """Token of a parked join or sync -> its group (answered when the group unloads)."""
        self._tokens = itertools.count(1)
        self._join_waiters: dict[int, asyncio.Future[JoinGroupResponse]] = {}
        self._sync_waiters: dict[int, asyncio.Future[SyncGroupResponse]] = {}
        self._timers: dict[str, tuple[int, asyncio.TimerHandle]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._writes = OwnedWrites()
        self._write_locks: dict[int, asyncio.Lock] = {}
        self._retention_timer: asyncio.TimerHandle | None = None
        self._started = False
        self._closed = False
        self._txn_offsets = PendingTxnOffsets()
        self._seq = itertools.count()
        self._plain_seq: dict[tuple[str, TopicPartition], int] = {}

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Single node: replay ``__consumer_offsets`` into groups. Cluster mode (a
        ``placement``): nothing is owned until ``became_leader``. Then start the
        offset-retention timer."""
        if self._placement is None:
            started = time.monotonic()
            records = await self._store.load()
            self._restore(records)
            self._restore_pending(self._store.take_pending())
            self._owned = dict.fromkeys(range(self._config.offsets_topic_num_partitions), 0)
            log.info(
                "group coordinator loaded %d groups from %d __consumer_offsets records in %.2f ms",
                len(self._groups),
                len(records),
                (time.monotonic() - started) * 1000,
            )
        self._started = True
        self._schedule_retention()

    def _restore(self, records: Sequence[KeyValue]) -> None:
        """Rebuild groups from records of ``__consumer_offsets``.

        The records come in append order per partition, so the last record of a key wins and
        a tombstone removes what came before it: on a compacted log that is the same state
        as replaying the whole history.
        """
        offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        metadata: dict[str, GroupRecord | None] = {}
        for raw_key, raw_value in records:
            try:
                key = decode_key(raw_key)
                if isinstance(key, OffsetKey):
                    group_offsets = offsets.setdefault(key.group_id, {})
                    if raw_value is None:
                        group_offsets.pop(key.topic_partition, None)
                    else:
                        group_offsets[key.topic_partition] = decode_offset_value(raw_value)
                else:
                    value = None if raw_value is None else decode_group_value(raw_value)
                    metadata[key.group_id] = value
            except SchemaError as exc:
                log.warning("skipping unreadable __consumer_offsets record: %s", exc)
        now = self._now()
        for group_id in offsets.keys() | metadata.keys():
            group_offsets = offsets.get(group_id, {})
            record = metadata.get(group_id)
            if record is None and not group_offsets:
                continue  # deleted: a tombstone was the last word
            group = Group.restore(group_id, record, group_offsets, self._config, now)
            self._groups[group_id] = group
            self._rearm(group)

    # --- leadership of __consumer_offsets partitions (cluster mode) ---------------------------

    def became_leader(self, partition: int, leader_epoch: int) -> None:
        """Own ``partition`` from now on: load its groups in the background (Kafka's
        ``onElection``); a partition already owned or loading stays as it is."""
        if self._closed:
            return
        if partition in self._owned:
            return
        loading = self._loading.get(partition)
        if loading is not None:
            self._loading[partition] = (loading[0], leader_epoch)
            return
        generation = next(self._tokens)
        self._loading[partition] = (generation, leader_epoch)
        self._spawn(self._load(partition, generation))

    def became_follower(self, partition: int, leader_epoch: int) -> None:
        """Another broker (or none) leads ``partition`` now: drop its groups (Kafka's
        ``onResignation``)."""
        self._unload(partition)

    def stopped(self, partition: int) -> None:
        self._unload(partition)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def loading(self, partition: int) -> bool:
        return partition in self._loading

    async def _load(self, partition: int, generation: int) -> None:
        started = time.monotonic()
        try:
            loaded = await self._store.load_partition(partition)
        except Exception:
            log.exception("loading __consumer_offsets-%d failed", partition)
            if self._loading.get(partition, (None,))[0] == generation:
                del self._loading[partition]
                self._markers_while_loading.pop(partition, None)
            return
        current = self._loading.get(partition)
        if current is None or current[0] != generation or self._closed:
            return
        del self._loading[partition]
        markers = self._markers_while_loading.pop(partition, [])
        before = len(self._groups)
        self._restore(loaded.records)
        self._restore_pending(loaded.pending)
        for producer_id, committed, marker_offset in markers:
            if marker_offset >= loaded.end_offset:
                self._complete(partition, producer_id, committed)
        self._owned[partition] = generation
        log.info(
            "__consumer_offsets-%d loaded at leader epoch %d: %d groups from %d records in %.2f ms",
            partition,
            current[1],
            len(self._groups) - before,
            len(loaded.records),
            (time.monotonic() - started) * 1000,
        )

    def _unload(self, partition: int) -> None:
        self._loading.pop(partition, None)
        self._markers_while_loading.pop(partition, None)
        owned = self._owned.pop(partition, None) is not None
        n = self._config.offsets_topic_num_partitions
        self._txn_offsets.drop(lambda g: partition_for(g, n) == partition)
        dropped = {g for g in self._groups if partition_for(g, n) == partition}
        for key in [k for k in self._plain_seq if partition_for(k[0], n) == partition]:
            del self._plain_seq[key]
        for group_id in dropped:
            del self._groups[group_id]
            timer = self._timers.pop(group_id, None)
            if timer is not None:
                timer[1].cancel()
        for token, group_id in list(self._waiting_group.items()):
            if group_id not in dropped:
                continue
            jf = self._join_waiters.pop(token, None)
            if jf is not None and not jf.done():
                jf.set_result(JoinGroupResponse(error_code=ErrorCode.NOT_COORDINATOR))
            sf = self._sync_waiters.pop(token, None)
            if sf is not None and not sf.done():
                sf.set_result(SyncGroupResponse(error_code=ErrorCode.NOT_COORDINATOR))
        if owned or dropped:
            log.info("__consumer_offsets-%d unloaded: %d groups dropped", partition, len(dropped))

    def _restore_pending(self, pending: dict[int, list[KeyValue]]) -> None:
        """Transactional offsets whose marker the load did not find: pending again."""
        for producer_id, records in pending.items():
            for raw_key, raw_value in records:
                key = decode_key(raw_key)
                if isinstance(key, OffsetKey) and raw_value is not None:
                    self._txn_offsets.add(
                        producer_id,
                        key.group_id,
                        {key.topic_partition: decode_offset_value(raw_value)},
                        next(self._seq),
                    )

    def on_marker(
        self, topic: str, partition: int, producer_id: int, committed: bool, marker_offset: int
    ) -> None:
        """A transaction marker landed on ``__consumer_offsets-<partition>``: materialise
        (COMMIT) or drop (ABORT) the producer's pending transactional offsets of that
        partition's groups. While the partition loads, the marker is held for the load's end:
        the offsets it completes may not be pending yet."""
        if topic != OFFSETS_TOPIC:
            return
        if partition in self._loading:
            held = self._markers_while_loading.setdefault(partition, [])
            held.append((producer_id, committed, marker_offset))
            return
        self._complete(partition, producer_id, committed)

    def _complete(self, partition: int, producer_id: int, committed: bool) -> None:
        n = self._config.offsets_topic_num_partitions
        taken = self._txn_offsets.complete(producer_id, lambda g: partition_for(g, n) == partition)
        if not committed:
            return
        for group_id, offsets in taken.items():
            group = self._groups.get(group_id)
            if group is None:
                group = self._groups[group_id] = Group(group_id, self._config, self._now())
            for tp, pending in offsets.items():
                if self._plain_seq.get((group_id, tp), -1) < pending.sequence:
                    group.offsets[tp] = pending.offset

    async def close(self) -> None:
        """Stop timers, fail every waiting request, and wait for writes in flight."""
        self._closed = True
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for jf in self._join_waiters.values():
            if not jf.done():
                jf.set_result(JoinGroupResponse(error_code=ErrorCode.NOT_COORDINATOR))
        for sf in self._sync_waiters.values():
            if not sf.done():
                sf.set_result(SyncGroupResponse(error_code=ErrorCode.NOT_COORDINATOR))
        self._join_waiters.clear()
        self._sync_waiters.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._writes.close(cancel=False)

    def _unavailable(self, group_id: str | None = None) -> ErrorCode | None:
        """Kafka's ``validateGroupStatus``: not this broker's group (NOT_COORDINATOR) or its
        partition still loading (COORDINATOR_LOAD_IN_PROGRESS); None when it may be served."""
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        if not self._started:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not group_id:
            return None
        partition = partition_for(group_id, self._config.offsets_topic_num_partitions)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    # --- FindCoordinator ----------------------------------------------------------------------

    async def find_coordinator(self, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
        valid = req.key_type in (CoordinatorKeyType.GROUP, CoordinatorKeyType.TRANSACTION)
        entries = []
        for key in req.keys:
            if valid and self._placement is not None and req.key_type == CoordinatorKeyType.GROUP:
                partition = partition_for(key, self._config.offsets_topic_num_partitions)
                entries.append(await self._placement.coordinator_for(key, partition))
            elif valid:
                entries.append(
                    CoordinatorEntry(
                        key=key,
                        node_id=self._node.node_id,
                        host=self._node.host,
                        port=self._node.port,
                    )
                )
            else:
                entries.append(
                    CoordinatorEntry(
                        key=key,
                        node_id=-1,
                        host="",
                        port=-1,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message=f"unsupported coordinator key type {req.key_type}",
                    )
                )
        return FindCoordinatorResponse(coordinators=tuple(entries))

    # --- membership ---------------------------------------------------------------------------

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResponse:
        """Long-polls until the rebalance this join takes part in completes."""
        error = self._unavailable(req.group_id) or check_join_request(req, self._config)
        if error is not ErrorCode.NONE:
            return JoinGroupResponse(error_code=error, member_id=req.member_id)
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinGroupResponse(
                    error_code=ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id
                )
            group = self._groups[req.group_id] = Group(req.group_id, self._config, self._now())
        token = next(self._tokens)
        reply = group.join(req, self._now(), token)
        return await self._reply_or_wait(group, reply, token, self._join_waiters)

    async def _reply_or_wait(
        self, group: Group, reply: R | None, token: int, waiters: dict[int, asyncio.Future[R]]
    ) -> R:
        """JoinGroup and SyncGroup long-poll the same way: the state machine either answers at
        once or parks the call under ``token`` until ``_after`` (now or on a later event or
        timer) resolves it. The future is registered before ``_after`` runs so an outcome
        produced by this very call is not lost."""
        future: asyncio.Future[R] | None = None
        if reply is None:
            future = waiters[token] = asyncio.get_running_loop().create_future()
            self._waiting_group[token] = group.group_id
        self._after(group)
        if reply is not None:
            return reply
        assert future is not None
        try:
            return await future
        finally:
            waiters.pop(token, None)
            self._waiting_group.pop(token, None)

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResponse:
        """Followers long-poll until the leader's assignment for this generation is written."""
        error = self._unavailable(req.group_id)
        if error is not None:
            return SyncGroupResponse(error_code=error)
        if not req.group_id:
            return SyncGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        token = next(self._tokens)
        reply = group.sync(req, self._now(), token)
        return await self._reply_or_wait(group, reply, token, self._sync_waiters)

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        error = self._unavailable(req.group_id)
        if error is not None:
            return HeartbeatResponse(error_code=error)
        if not req.group_id:
            return HeartbeatResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        code = group.heartbeat(req.member_id, req.group_instance_id, req.generation_id, self._now())
        self._after(group)
        return HeartbeatResponse(error_code=code)

    async def leave_group(self, req: LeaveGroupRequest) -> LeaveGroupResponse:
        error = self._unavailable(req.group_id)
        if error is not None:
            return LeaveGroupResponse(error_code=error)
        if not req.group_id:
            return LeaveGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return LeaveGroupResponse(
                error_code=ErrorCode.NONE,
                members=tuple(
                    LeftMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                    )
                    for m in req.members
                ),
            )
        if group.state is DEAD:
            return LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        results = group.leave(req.members, self._now())
        self._after(group)
        return LeaveGroupResponse(error_code=ErrorCode.NONE, members=results)

    # --- offsets ------------------------------------------------------------------------------

    async def commit_offsets(
        self, req: OffsetCommitRequest, producer: tuple[int, int] | None = None
    ) -> OffsetCommitResponse:
        """OffsetCommit; with ``producer`` (id, epoch) TxnOffsetCommit, whose offsets are
        written into that producer's transaction and stay pending until its marker."""

        def every(code: ErrorCode) -> OffsetCommitResponse:
            return OffsetCommitResponse(
                partitions=tuple(
                    OffsetCommitPartitionResult(
                        topic=p.topic, partition=p.partition, error_code=code
                    )
                    for p in req.partitions
                )
            )

        error = self._unavailable(req.group_id)
        if error is not None:
            return every(error)
        if not req.group_id:
            return every(ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                # A generation implies group management, and that group is gone.
                return every(ErrorCode.ILLEGAL_GENERATION)
            group = self._groups[req.group_id] = Group(req.group_id, self._config, self._now())
        now = self._now()
        code = group.check_commit(req.member_id, req.group_instance_id, req.generation_id, now)
        self._after(group)
        if code is not ErrorCode.NONE:
            return every(code)
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for p in req.partitions:
            tp = TopicPartition(p.topic, p.partition)
            metadata = p.metadata or ""
            if len(metadata.encode("utf-8")) > self._config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif self._partition_exists is not None and not self._partition_exists(*tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                commit_ts = p.commit_timestamp_ms if p.commit_timestamp_ms >= 0 else now
                expire_ts = now + req.retention_time_ms if req.retention_time_ms >= 0 else None
                accepted[tp] = CommittedOffset(
                    p.offset, p.leader_epoch, metadata, commit_ts, expire_ts
                )
                results[tp] = ErrorCode.NONE
        if accepted:
            records = [
                (offset_key(group.group_id, tp), offset_value(v)) for tp, v in accepted.items()
            ]

            def written(error: ErrorCode) -> None:
                if error is ErrorCode.NONE:
                    self._committed(group, accepted, producer)

            write_error = await self._write(
                group.group_id, records, now, kind=_COMMIT, producer=producer, then=written
            )
            if write_error is not ErrorCode.NONE:
                for tp in accepted:
                    results[tp] = write_error
        return OffsetCommitResponse(
            partitions=tuple(
                OffsetCommitPartitionResult(
                    topic=p.topic,
                    partition=p.partition,
                    error_code=results[TopicPartition(p.topic, p.partition)],
                )
                for p in req.partitions
            )
        )

    def _committed(
        self,
        group: Group,
        accepted: dict[TopicPartition, CommittedOffset],
        producer: tuple[int, int] | None,
    ) -> None:
        """Offsets are written: applied now, or pending in ``producer``'s transaction."""
        seq = next(self._seq)
        if producer is not None:
            self._txn_offsets.add(producer[0], group.group_id, accepted, seq)
            return
        for tp in accepted:
            self._plain_seq[(group.group_id, tp)] = seq
        if self._groups.get(group.group_id) is group and group.state is not DEAD:
            group.offsets.update(accepted)

    async def fetch_offsets(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        return OffsetFetchResponse(
            groups=tuple(
                self._fetch_group(g, self._unavailable(g.group_id), req.require_stable)
                for g in req.groups
            )
        )

    def _fetch_group(
        self, req: OffsetFetchGroup, error: ErrorCode | None, require_stable: bool = False
    ) -> OffsetFetchGroupResult:
        if error is not None:
            return OffsetFetchGroupResult(group_id=req.group_id, error_code=error)
        if not req.group_id:
            return OffsetFetchGroupResult(
                group_id=req.group_id, error_code=ErrorCode.INVALID_GROUP_ID
            )
        group = self._groups.get(req.group_id)
        committed = group.offsets if group is not None else {}
        wanted = sorted(committed) if req.partitions is None else list(req.partitions)
        partitions = []
        for tp in wanted:
            c = committed.get(tp)
            if require_stable and self._txn_offsets.is_pending(req.group_id, tp):
                partitions.append(
                    FetchedOffset(
                        topic=tp.topic,
                        partition=tp.partition,
                        error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT,
                    )
                )
            elif c is None:
                partitions.append(
                    FetchedOffset(
                        topic=tp.topic,
                        partition=tp.partition,
                        offset=NO_OFFSET,
                        leader_epoch=NO_LEADER_EPOCH,
                        metadata="",
                    )
                )
            else:
                partitions.append(
                    FetchedOffset(
                        topic=tp.topic,
                        partition=tp.partition,
                        offset=c.offset,
                        leader_epoch=c.leader_epoch,
                        metadata=c.metadata,
                    )
                )
        return OffsetFetchGroupResult(
            group_id=req.group_id, error_code=ErrorCode.NONE, partitions=tuple(partitions)
        )

    # --- admin --------------------------------------------------------------------------------

    async def list_groups(self, req: ListGroupsRequest) -> ListGroupsResponse:
        error = self._unavailable()
        if error is None and self._loading:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if error is not None:
            return ListGroupsResponse(error_code=error, groups=())
        states = {s.lower() for s in req.states_filter}
        types = {t.lower() for t in req.types_filter}
        if types and "classic" not in types:
            return ListGroupsResponse(error_code=ErrorCode.NONE, groups=())
        listed = tuple(
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
            )
            for g in self._groups.values()
            if g.state is not DEAD and (not states or g.state.value.lower() in states)
        )
        return ListGroupsResponse(error_code=ErrorCode.NONE, groups=listed)

    async def describe_groups(self, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
        described = []
        for group_id in req.group_ids:
            error = self._unavailable(group_id)
            group = self._groups.get(group_id)
            if error is not None or not group_id:
                code = error if error is not None else ErrorCode.INVALID_GROUP_ID
                described.append(DescribedGroup(error_code=code, group_id=group_id, group_state=""))
            elif group is None:
                described.append(
                    DescribedGroup(
                        error_code=ErrorCode.NONE, group_id=group_id, group_state=DEAD.value
                    )
                )
            else:
                described.append(group.describe())
        return DescribeGroupsResponse(groups=tuple(described))

    async def delete_groups(self, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
        results = []
        for group_id in req.group_ids:
            error = self._unavailable(group_id)
            group = self._groups.get(group_id)
            if error is not None:
                code = error
            elif not group_id:
                code = ErrorCode.INVALID_GROUP_ID
            elif group is None or group.state is DEAD:
                code = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not EMPTY:
                code = ErrorCode.NON_EMPTY_GROUP
            else:
                code = await self._remove_group(group, list(group.offsets))
            results.append(DeletedGroup(group_id=group_id, error_code=code))
        return DeleteGroupsResponse(results=tuple(results))

    async def delete_offsets(self, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
        """OffsetDelete: tombstones for the offsets the group may lose (see
        ``Group.offsets_to_delete``); partitions of topics this broker does not host answer
        UNKNOWN_TOPIC_OR_PARTITION, as Kafka's request handler does before asking the group."""
        error = self._unavailable(req.group_id)
        if error is not None:
            return OffsetDeleteResponse(error_code=error)
        if not req.group_id:
            return OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)
        known = [
            tp
            for tp in req.partitions
            if self._partition_exists is None or self._partition_exists(*tp)
        ]
        code, results, eligible = group.offsets_to_delete(known)
        if code is not ErrorCode.NONE:
            return OffsetDeleteResponse(error_code=code)
        if eligible:
            tombstones: list[KeyValue] = [(offset_key(group.group_id, tp), None) for tp in eligible]

            def deleted(error: ErrorCode) -> None:
                if error is ErrorCode.NONE:
                    for tp in eligible:
                        group.offsets.pop(tp, None)

            write_error = await self._write(group.group_id, tombstones, self._now(), then=deleted)
            if write_error is not ErrorCode.NONE:
                results.update(dict.fromkeys(eligible, write_error))
        return OffsetDeleteResponse(
            error_code=ErrorCode.NONE,
            partitions=tuple(
                OffsetDeletePartitionResult(
                    topic=tp.topic,
                    partition=tp.partition,
                    error_code=results.get(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                )
                for tp in req.partitions
            ),
        )

    async def expire_offsets(self) -> int:
        """Drop offsets past retention, and groups left Empty with none; returns how many."""
        now = self._now()
        removed = 0
        for group in list(self._groups.values()):
            expired = group.expired_offsets(now, self._config.offsets_retention_ms)
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if group.state is EMPTY and not group.offsets:
                await self._remove_group(group, expired)
            elif expired:
                tombstones: list[KeyValue] = [
                    (offset_key(group.group_id, tp), None) for tp in expired
                ]
                await self._write(group.group_id, tombstones, now)
        return removed

    async def _remove_group(self, group: Group, partitions: Sequence[TopicPartition]) -> ErrorCode:
        now = self._now()
        group.mark_dead(now)
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
        timer = self._timers.pop(group.group_id, None)
        if timer is not None:
            timer[1].cancel()
        tombstones: list[KeyValue] = [(offset_key(group.group_id, tp), None) for tp in partitions]
        tombstones.append((group_key(group.group_id), None))
        return await self._write(group.group_id, tombstones, now)

    # --- plumbing -----------------------------------------------------------------------------

    def _after(self, group: Group) -> None:
        """Carry out what the state machine asked for, then re-arm the group's timer."""
        out = group.take_outcome()
        for token, join_reply in out.joins:
            jf = self._join_waiters.pop(token, None)
            if jf is not None and not jf.done():
                jf.set_result(join_reply)
        for token, sync_reply in out.syncs:
            sf = self._sync_waiters.pop(token, None)
            if sf is not None and not sf.done():
                sf.set_result(sync_reply)
        if out.persist_assignment is not None:
            self._spawn(
                self._persist_assignment(group, out.persist_assignment, group.group_record())
            )
        elif out.store_group:
            self._spawn(self._store_group(group.group_id, group.group_record()))
        self._rearm(group)

    async def _persist_assignment(self, group: Group, generation: int, record: GroupRecord) -> None:
        error = await self._write(
            group.group_id,
            [(group_key(group.group_id), group_value(record))],
            self._now(),
            kind=_GROUP_METADATA,
        )
        group.assignment_persisted(generation, error, self._now())
        self._after(group)

    async def _store_group(self, group_id: str, record: GroupRecord) -> None:
        await self._write(group_id, [(group_key(group_id), group_value(record))], self._now())

    async def _write(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        now: int,
        *,
        kind: str = _TOMBSTONES,
        producer: tuple[int, int] | None = None,
        then: Callable[[ErrorCode], None] | None = None,
    ) -> ErrorCode:
        """Append in call order per partition; a failed append becomes the code Kafka would
        answer with for that ``kind`` of write (see ``_coordinator_error``). A partition that
        changed hands meanwhile answers NOT_COORDINATOR. ``then`` applies the outcome to memory:
        it runs, with the write, even if the request is cancelled (``OwnedWrites``)."""
        partition = partition_for(group_id, self._config.offsets_topic_num_partitions)
        owner = self._owned.get(partition)
        if owner is None:
            return ErrorCode.NOT_COORDINATOR
        # the owner is read here, at the request's decision, not when the write's task starts
        return await self._writes.run(
            self._write_now(partition, owner, group_id, records, now, kind, producer, then)
        )

    async def _write_now(
        self,
        partition: int,
        owner: int,
        group_id: str,
        records: Sequence[KeyValue],
        now: int,
        kind: str,
        producer: tuple[int, int] | None,
        then: Callable[[ErrorCode], None] | None,
    ) -> ErrorCode:
        lock = self._write_locks.setdefault(partition, asyncio.Lock())
        error = ErrorCode.NONE
        async with lock:
            try:
                await self._store.append(partition, records, now, producer=producer)
            except OffsetsStoreError as exc:
                log.warning(
                    "__consumer_offsets-%d append for %r failed: %s", partition, group_id, exc
                )
                error = _coordinator_error(exc.code, kind)
        if error is ErrorCode.NONE and self._owned.get(partition) != owner:
            error = ErrorCode.NOT_COORDINATOR
        if then is not None:
            then(error)
        return error

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", exc_info=task.exception())

    def _rearm(self, group: Group) -> None:
        """Keep one timer per group, no later than the group's next deadline.

        A timer that fires early is harmless (``tick`` checks every deadline), so the common
        case of a heartbeat pushing a deadline back does not touch the timer at all.
        """
        if self._closed or self._groups.get(group.group_id) is not group:
            return
        deadline = group.next_deadline()
        if deadline is None:
            return
        armed = self._timers.get(group.group_id)
        if armed is not None and armed[0] <= deadline:
            return
        if armed is not None:
            armed[1].cancel()
        delay = max(deadline - self._now(), 0) / 1000
        handle = asyncio.get_running_loop().call_later(delay, self._on_timer, group.group_id)
        self._timers[group.group_id] = (deadline, handle)

    def _on_timer(self, group_id: str) -> None:
        self._timers.pop(group_id, None)
        group = self._groups.get(group_id)
        if group is None or self._closed:
            return
        group.tick(self._now())
        self._after(group)

    def _schedule_retention(self) -> None:
        if self._closed:
            return
        interval = self._config.offsets_retention_check_interval_ms / 1000
        self._retention_timer = asyncio.get_running_loop().call_later(
            interval, lambda: self._spawn(self._retention_round())
        )

    async def _retention_round(self) -> None:
        try:
            removed = await self.expire_offsets()
            if removed:
                log.info("expired %d committed offsets", removed)
        finally:
            self._schedule_retention()


def _coordinator_error(code: ErrorCode, kind: str = _TOMBSTONES) -> ErrorCode:
    """Kafka's mapping of a failed ``__consumer_offsets`` append to what clients are told
    (``GroupMetadataManager``). An offset commit (``storeOffsets``) keeps REQUEST_TIMED_OUT
    and answers INVALID_COMMIT_OFFSET_SIZE for a batch too large; a group's metadata
    (``storeGroup``, SyncGroup) answers REBALANCE_IN_PROGRESS on a timeout and
    UNKNOWN_SERVER_ERROR for a batch too large; tombstones (OffsetDelete, DeleteGroups)
    treat a timeout as COORDINATOR_NOT_AVAILABLE."""
    too_large = (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    )
    if code is ErrorCode.REQUEST_TIMED_OUT:
        return {
            _COMMIT: code,
            _GROUP_METADATA: ErrorCode.REBALANCE_IN_PROGRESS,
        }.get(kind, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if kind == _GROUP_METADATA and code in too_large:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in too_large:
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code
