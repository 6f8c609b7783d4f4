"""The classic consumer-group state machine, all of it.

Rules of this file
------------------
1. Everything that decides a group's state, membership, generation, leader, selected protocol,
   assignment or error codes lives here. ``coordinator.py`` only moves futures, timers and
   bytes: it never decides anything about a group.
2. No I/O, no asyncio, no clock reads. Time arrives as ``now_ms`` arguments (wall-clock
   milliseconds, like Kafka's ``time.milliseconds()``). Timers are deadlines: the caller asks
   ``next_deadline()`` and calls ``tick(now_ms)`` when it passes.
3. A request whose answer is known at once gets it as the return value. A request that must
   wait (JoinGroup during a rebalance, a SyncGroup before the leader's assignment is written)
   returns ``None`` and is remembered on its member by an opaque integer *token*; its answer
   appears later in ``take_outcome()`` as ``(token, response)``. Tokens are never reused by
   the caller, so a superseded waiter can be answered without confusing it with its successor.
4. Persisting is asked for, never done: ``Outcome.store_group`` means "write the group
   metadata record now", and ``Outcome.persist_assignment`` means "write it, then call
   ``assignment_persisted``" (followers learn their assignment only after the write, as in
   Kafka, so that a crash cannot hand out an assignment that a restart would forget).
5. Error precedence and state behaviour follow Apache Kafka's classic ``GroupCoordinator``;
   where Kafka leaves a waiter unanswered forever, we answer it with a retriable error.

Theory of operation
-------------------
::

    Empty --first JoinGroup--> PreparingRebalance --all joined, or timeout--> CompletingRebalance
      ^                          ^   |                                          |
      |                          |   +--(no members left)--> Empty              | leader's
      |                          |                                              | SyncGroup
      |                          +--- join / leave / session expiry ---- Stable <-+ written
      +------------- DeleteGroups (from Empty only) ---------------------> Dead

* PreparingRebalance waits until every known member has rejoined and no member-id is pending
  (MEMBER_ID_REQUIRED handed out, not yet used), or until the longest rebalance timeout of
  its members. The first rebalance of an Empty group instead waits
  ``initial_rebalance_delay_ms``, extended while new members keep arriving (generation 0
  only) up to the rebalance timeout, so that a fleet of starting consumers lands in one
  generation.
* When the join completes, dynamic members that did not rejoin are dropped, the generation
  increments, the protocol is chosen by vote among the protocols every member supports,
  and every waiting JoinGroup is answered (the leader also gets every member's metadata).
* Members must then SyncGroup within the rebalance timeout or be removed (which starts a new
  rebalance). The leader's SyncGroup carries the assignment; once written, every waiting
  SyncGroup is answered and the group is Stable.
* A member's session expires ``session_timeout_ms`` after its last sign of life (join, sync,
  heartbeat, valid offset commit), except while it has a JoinGroup or SyncGroup waiting: the
  rebalance timeout bounds those instead.
* Static members (``group.instance.id``) survive a missed rebalance and may come back under a
  new member id; the old member id is then fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.config import GroupCoordinatorConfig
from tierlog.server.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from tierlog.server.group.model import (
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeavingMember,
    LeftMember,
    Protocol,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)
from tierlog.server.group.schema import CommittedOffset, GroupRecord, MemberRecord


class GroupState(Enum):
    """The value is the name Kafka reports in ListGroups / DescribeGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# The one transition table: target state -> states it may be entered from.
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    EMPTY: frozenset({PREPARING}),
    PREPARING: frozenset({STABLE, COMPLETING, EMPTY}),
    COMPLETING: frozenset({PREPARING}),
    STABLE: frozenset({COMPLETING}),
    DEAD: frozenset({STABLE, PREPARING, COMPLETING, EMPTY, DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """A transition outside ``_VALID_PREVIOUS``: always a bug in this file."""


def check_join_request(req: JoinGroupRequest, config: GroupCoordinatorConfig) -> ErrorCode:
    """Checks that do not depend on the group; the coordinator runs them before creating it."""
    if not req.group_id:
        return ErrorCode.INVALID_GROUP_ID
    if not (
        config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms
    ):
        return ErrorCode.INVALID_SESSION_TIMEOUT
    return ErrorCode.NONE


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_waiter: int | None = None
    sync_waiter: int | None = None
    is_new: bool = False
    session_deadline_ms: int = 0

    def metadata_for(self, protocol_name: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol_name:
                return p.metadata
        return b""

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class Outcome:
    """What the caller must do after a call: answer waiters, and maybe persist."""

    joins: list[tuple[int, JoinGroupResponse]] = field(default_factory=list)
    syncs: list[tuple[int, SyncGroupResponse]] = field(default_factory=list)
    store_group: bool = False
    persist_assignment: int | None = None  # the generation whose assignment awaits a write

    def __bool__(self) -> bool:
        return bool(
            self.joins or self.syncs or self.store_group or self.persist_assignment is not None
        )


def _join_error(code: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, member_id=member_id)


def _sync_error(code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code)


class Group:
    """One consumer group. See the module docstring for the rules it follows."""

    def __init__(self, group_id: str, config: GroupCoordinatorConfig, now_ms: int) -> None:
        self.group_id = group_id
        self.config = config
        self.state = EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # MEMBER_ID_REQUIRED ids -> expiry deadline
        self.pending_sync: set[str] = set()
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self._new_member_added = False
        self._join_deadline_ms: int | None = None
        self._initial_delay_remaining_ms: int | None = None  # set while the first delay runs
        self._sync_deadline_ms: int | None = None
        self._pending_assignment: dict[str, bytes] | None = None
        self._out = Outcome()

    # --- restore / snapshot -----------------------------------------------------------------

    @classmethod
    def restore(
        cls,
        group_id: str,
        record: GroupRecord | None,
        offsets: dict[TopicPartition, CommittedOffset],
        config: GroupCoordinatorConfig,
        now_ms: int,
    ) -> Group:
        """Rebuild a group from ``__consumer_offsets``: Stable if it had members, else Empty.

        Restored members keep their ids and generation so that consumers that outlived a broker
        restart carry on heartbeating; those that did not return expire after their session.
        """
        group = cls(group_id, config, now_ms)
        group.offsets = dict(offsets)
        if record is None:
            return group
        group.protocol_type = record.protocol_type or None
        group.generation_id = record.generation_id
        group.protocol_name = record.protocol_name
        if record.current_state_timestamp_ms >= 0:
            group.state_timestamp_ms = record.current_state_timestamp_ms
        for m in record.members:
            protocols = (
                (Protocol(record.protocol_name, m.subscription),) if record.protocol_name else ()
            )
            group.members[m.member_id] = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=record.protocol_type,
                protocols=protocols,
                assignment=m.assignment,
                session_deadline_ms=now_ms + m.session_timeout_ms,
            )
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.members:
            leader = record.leader_id
            group.leader_id = leader if leader in group.members else next(iter(group.members))
            group.state = STABLE
            group.state_timestamp_ms = now_ms
        return group

    def group_record(self) -> GroupRecord:
        """The group metadata value to write; includes an assignment awaiting its write."""
        pending = self._pending_assignment
        return GroupRecord(
            protocol_type=self.protocol_type or "",
            generation_id=self.generation_id,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(self.protocol_name),
                    assignment=pending.get(m.member_id, b"")
                    if pending is not None
                    else m.assignment,
                )
                for m in self.members.values()
            ),
        )

    def take_outcome(self) -> Outcome:
        out, self._out = self._out, Outcome()
        return out

    # --- JoinGroup --------------------------------------------------------------------------

    def join(self, req: JoinGroupRequest, now_ms: int, token: int) -> JoinGroupResponse | None:
        """Answer now, or return None: the answer comes later in the outcome, under ``token``."""
        if self.state is DEAD:
            return _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not self._supports(req.protocol_type, req.protocols):
            return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if req.member_id == UNKNOWN_MEMBER_ID:
            reply = self._join_new(req, now_ms, token)
        else:
            reply = self._join_known(req, now_ms, token)
        self._maybe_complete_join(now_ms)
        return reply

    def _join_new(self, req: JoinGroupRequest, now_ms: int, token: int) -> JoinGroupResponse | None:
        if req.group_instance_id is not None:
            return self._join_static(req, req.group_instance_id, now_ms, token)
        if len(self.members) >= self.config.max_size:
            return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED)
        member_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.require_known_member_id:
            # KIP-394: the id is handed out first, so a client that loses this response does
            # not leave a phantom member behind; it becomes a member when it joins with it.
            self.pending_members[member_id] = now_ms + req.session_timeout_ms
            return _join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        self._add_member_and_rebalance(req, member_id, now_ms, token)
        return None

    def _join_static(
        self, req: JoinGroupRequest, instance_id: str, now_ms: int, token: int
    ) -> JoinGroupResponse | None:
        new_id = f"{instance_id}-{uuid.uuid4()}"
        old_id = self.static_members.get(instance_id)
        if old_id is None:
            if len(self.members) >= self.config.max_size:
                return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED)
            self._add_member_and_rebalance(req, new_id, now_ms, token)
            return None
        old = self.members[old_id]
        keeps_assignment = (
            self.state is STABLE and old_id != self.leader_id and old.matches(req.protocols)
        )
        member = self._replace_static_member(old, new_id, now_ms)
        if keeps_assignment:
            # A restarted static follower with unchanged subscription takes its old place
            # without a rebalance; the new id must be written so a restart remembers it.
            self._out.store_group = True
            return self._current_join_response(member)
        self._update_member_and_rebalance(member, req, now_ms, token)
        return None

    def _join_known(
        self, req: JoinGroupRequest, now_ms: int, token: int
    ) -> JoinGroupResponse | None:
        member_id = req.member_id
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            if len(self.members) >= self.config.max_size:
                return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
            self._add_member_and_rebalance(req, member_id, now_ms, token)
            return None
        error = self._check_member(member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            return _join_error(error, member_id)
        member = self.members[member_id]
        if self.state is PREPARING:
            self._update_member_and_rebalance(member, req, now_ms, token)
            return None
        if self.state is COMPLETING:
            if member.matches(req.protocols):
                # The member lost our JoinGroup answer; hand it the same answer again.
                member.session_deadline_ms = now_ms + member.session_timeout_ms
                return self._current_join_response(member)
            self._update_member_and_rebalance(member, req, now_ms, token)
            return None
        if self.state is STABLE:
            if member_id == self.leader_id or not member.matches(req.protocols):
                # The leader rejoining means it wants to reassign (e.g. topic metadata changed).
                self._update_member_and_rebalance(member, req, now_ms, token)
                return None
            member.session_deadline_ms = now_ms + member.session_timeout_ms
            return self._current_join_response(member)
        return _join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _add_member_and_rebalance(
        self, req: JoinGroupRequest, member_id: str, now_ms: int, token: int
    ) -> None:
        if not self.members:
            self.protocol_type = req.protocol_type
        self.members[member_id] = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            join_waiter=token,
            is_new=True,
            session_deadline_ms=now_ms + req.session_timeout_ms,
        )
        if req.group_instance_id is not None:
            self.static_members[req.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        if self.state is PREPARING and self.generation_id == 0:
            self._new_member_added = True
        self._maybe_prepare_rebalance(now_ms)

    def _update_member_and_rebalance(
        self, member: Member, req: JoinGroupRequest, now_ms: int, token: int
    ) -> None:
        if member.join_waiter is not None:
            self._out.joins.append(
                (member.join_waiter, _join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            )
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_waiter = token
        self._maybe_prepare_rebalance(now_ms)

    def _replace_static_member(self, old: Member, new_id: str, now_ms: int) -> Member:
        """Give a static member a new id, fencing whatever the old id was waiting for."""
        self._fail_waiters(old, ErrorCode.FENCED_INSTANCE_ID)
        old_id = old.member_id
        old.member_id = new_id
        old.session_deadline_ms = now_ms + old.session_timeout_ms
        self.members = {(new_id if k == old_id else k): m for k, m in self.members.items()}
        assert old.group_instance_id is not None
        self.static_members[old.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return old

    def _current_join_response(self, member: Member) -> JoinGroupResponse:
        return JoinGroupResponse(
            error_code=ErrorCode.NONE,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            member_id=member.member_id,
            members=self._member_list() if member.member_id == self.leader_id else (),
        )

    def _member_list(self) -> tuple[JoinGroupMember, ...]:
        return tuple(
            JoinGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata_for(self.protocol_name),
            )
            for m in self.members.values()
        )

    def _supports(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and any(
            p.name in self._candidate_protocols() for p in protocols
        )

    def _candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        names = {p.name for p in first.protocols}
        for m in members:
            names &= {p.name for p in m.protocols}
        return names

    def _select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        candidates = self._candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(p.name for p in m.protocols if p.name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # dicts keep first-vote order, so ties go to the protocol voted for first
        return max(votes, key=lambda name: votes[name])

    # --- rebalance ----------------------------------------------------------------------------

    def _rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _maybe_prepare_rebalance(self, now_ms: int) -> None:
        if self.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is COMPLETING:
            self._reset_and_propagate_assignment_error(ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        self.pending_sync.clear()
        self._sync_deadline_ms = None
        self._pending_assignment = None
        if self.state is EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            self._initial_delay_remaining_ms = max(self._rebalance_timeout_ms() - delay, 0)
            self._join_deadline_ms = now_ms + delay
        else:
            self._initial_delay_remaining_ms = None
            self._join_deadline_ms = now_ms + self._rebalance_timeout_ms()
        self._transition(PREPARING, now_ms)

    def _all_joined(self) -> bool:
        return not self.pending_members and all(
            m.join_waiter is not None for m in self.members.values()
        )

    def _maybe_complete_join(self, now_ms: int) -> None:
        if (
            self.state is PREPARING
            and self._initial_delay_remaining_ms is None
            and self._all_joined()
        ):
            self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        self._join_deadline_ms = None
        self._initial_delay_remaining_ms = None
        self._new_member_added = False
        for m in list(self.members.values()):
            if m.join_waiter is None and m.group_instance_id is None:
                self._remove_member(m)
        if not self._elect_joined_leader() and self.members:
            # Only static members that have not rejoined remain: give them another round.
            self._join_deadline_ms = now_ms + self._rebalance_timeout_ms()
            return
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self._transition(EMPTY, now_ms)
            self._out.store_group = True
            return
        self.protocol_name = self._select_protocol()
        self._transition(COMPLETING, now_ms)
        members = self._member_list()
        for m in self.members.values():
            if m.join_waiter is not None:
                reply = JoinGroupResponse(
                    error_code=ErrorCode.NONE,
                    generation_id=self.generation_id,
                    protocol_type=self.protocol_type,
                    protocol_name=self.protocol_name,
                    leader=self.leader_id or "",
                    member_id=m.member_id,
                    members=members if m.member_id == self.leader_id else (),
                )
                self._out.joins.append((m.join_waiter, reply))
                m.join_waiter = None
            m.is_new = False
            m.session_deadline_ms = now_ms + m.session_timeout_ms
        self.pending_sync = set(self.members)
        self._sync_deadline_ms = now_ms + self._rebalance_timeout_ms()

    def _elect_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].join_waiter is not None:
            return True
        for m in self.members.values():
            if m.join_waiter is not None:
                self.leader_id = m.member_id
                return True
        return False

    # --- SyncGroup ----------------------------------------------------------------------------

    def sync(self, req: SyncGroupRequest, now_ms: int, token: int) -> SyncGroupResponse | None:
        if self.state is DEAD:
            return _sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._check_member(req.member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            return _sync_error(error)
        if req.generation_id != self.generation_id:
            return _sync_error(ErrorCode.ILLEGAL_GENERATION)
        if (req.protocol_type is not None and req.protocol_type != self.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != self.protocol_name
        ):
            return _sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = self.members[req.member_id]
        if self.state is EMPTY:
            return _sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is PREPARING:
            return _sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
        self.pending_sync.discard(member.member_id)
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is STABLE:
            return self._sync_reply(ErrorCode.NONE, member.assignment)
        # CompletingRebalance: everyone waits for the leader's assignment to be written.
        if member.sync_waiter is not None:
            superseded = _sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
            self._out.syncs.append((member.sync_waiter, superseded))
        member.sync_waiter = token
        if member.member_id == self.leader_id and self._pending_assignment is None:
            self._pending_assignment = {mid: req.assignments.get(mid, b"") for mid in self.members}
            self._out.persist_assignment = self.generation_id
        return None

    def assignment_persisted(self, generation_id: int, error: ErrorCode, now_ms: int) -> None:
        """The write asked for by ``persist_assignment`` finished (or failed with ``error``)."""
        pending = self._pending_assignment
        if self.state is not COMPLETING or generation_id != self.generation_id or pending is None:
            return  # a rebalance overtook the write; its waiters were already answered
        self._pending_assignment = None
        if error is not ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(error, now_ms)
            self._maybe_prepare_rebalance(now_ms)
            return
        for mid, m in self.members.items():
            m.assignment = pending.get(mid, b"")
        self._propagate_assignment(ErrorCode.NONE, now_ms)
        self._transition(STABLE, now_ms)

    def _sync_reply(self, error: ErrorCode, assignment: bytes) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=error,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            assignment=assignment,
        )

    def _reset_and_propagate_assignment_error(self, error: ErrorCode, now_ms: int) -> None:
        for m in self.members.values():
            m.assignment = b""
        self._propagate_assignment(error, now_ms)

    def _propagate_assignment(self, error: ErrorCode, now_ms: int) -> None:
        for m in self.members.values():
            if m.sync_waiter is not None:
                assignment = m.assignment if error is ErrorCode.NONE else b""
                self._out.syncs.append((m.sync_waiter, self._sync_reply(error, assignment)))
                m.sync_waiter = None
                m.session_deadline_ms = now_ms + m.session_timeout_ms

    # --- Heartbeat / LeaveGroup ---------------------------------------------------------------

    def heartbeat(
        self, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int
    ) -> ErrorCode:
        if self.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._check_member(member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if self.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = self.members[member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, leaving: Iterable[LeavingMember], now_ms: int) -> tuple[LeftMember, ...]:
        results = []
        for lm in leaving:
            member_id = lm.member_id
            error = ErrorCode.NONE
            if member_id == UNKNOWN_MEMBER_ID and lm.group_instance_id is not None:
                member_id = self.static_members.get(lm.group_instance_id, UNKNOWN_MEMBER_ID)
                if member_id == UNKNOWN_MEMBER_ID:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
            if error is ErrorCode.NONE and member_id in self.pending_members:
                del self.pending_members[member_id]
                self._maybe_complete_join(now_ms)
            elif error is ErrorCode.NONE:
                error = self._check_member(member_id, lm.group_instance_id)
                if error is ErrorCode.NONE:
                    self._remove_member_and_update(self.members[member_id], now_ms)
            results.append(
                LeftMember(
                    member_id=lm.member_id, group_instance_id=lm.group_instance_id, error_code=error
                )
            )
        return tuple(results)

    def _check_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is not None and current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _remove_member(self, member: Member) -> None:
        del self.members[member.member_id]
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member.member_id:
            del self.static_members[instance]
        self.pending_sync.discard(member.member_id)
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def _fail_waiters(self, member: Member, error: ErrorCode) -> None:
        """Answer the JoinGroup and SyncGroup ``member`` waits in, if any, with ``error``."""
        if member.join_waiter is not None:
            self._out.joins.append((member.join_waiter, _join_error(error, member.member_id)))
            member.join_waiter = None
        if member.sync_waiter is not None:
            self._out.syncs.append((member.sync_waiter, _sync_error(error)))
            member.sync_waiter = None

    def _remove_member_and_update(self, member: Member, now_ms: int) -> None:
        self._fail_waiters(member, ErrorCode.UNKNOWN_MEMBER_ID)
        self._remove_member(member)
        if self.state in (STABLE, COMPLETING):
            self._prepare_rebalance(now_ms)
        self._maybe_complete_join(now_ms)

    # --- timers -------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        if self.state is DEAD:
            return None
        deadlines = list(self.pending_members.values())
        if self._join_deadline_ms is not None:
            deadlines.append(self._join_deadline_ms)
        if self._sync_deadline_ms is not None:
            deadlines.append(self._sync_deadline_ms)
        deadlines.extend(
            m.session_deadline_ms
            for m in self.members.values()
            if m.join_waiter is None and m.sync_waiter is None
        )
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> None:
        """Fire every deadline that has passed by ``now_ms``."""
        if self.state is DEAD:
            return
        if (
            self.state is PREPARING
            and self._join_deadline_ms is not None
            and now_ms >= self._join_deadline_ms
        ):
            remaining = self._initial_delay_remaining_ms
            if remaining is not None and self._new_member_added and remaining > 0:
                delay = self.config.initial_rebalance_delay_ms
                self._new_member_added = False
                self._join_deadline_ms = now_ms + min(delay, remaining)
                self._initial_delay_remaining_ms = max(remaining - delay, 0)
            else:
                self._complete_join(now_ms)
        if self._sync_deadline_ms is not None and now_ms >= self._sync_deadline_ms:
            self._sync_deadline_ms = None
            laggards = [self.members[mid] for mid in self.pending_sync if mid in self.members]
            self.pending_sync.clear()
            for m in laggards:
                self._remove_member_and_update(m, now_ms)
        for member_id, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[member_id]
                self._maybe_complete_join(now_ms)
        for m in list(self.members.values()):
            idle = m.join_waiter is None and m.sync_waiter is None
            if idle and now_ms >= m.session_deadline_ms and m.member_id in self.members:
                self._remove_member_and_update(m, now_ms)

    # --- offsets ------------------------------------------------------------------------------

    def check_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int
    ) -> ErrorCode:
        """May this commit go ahead? A valid member's commit also counts as a heartbeat."""
        if self.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is not None and current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and self.state is EMPTY:
            return ErrorCode.NONE  # assign() consumers: the group only stores offsets
        if self.state is COMPLETING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.NONE

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past retention (KIP-211): counted from when the group became Empty.

        Groups that only store offsets (no protocol type) count from each commit. Offsets of a
        group with members never expire.
        """
        if self.protocol_type is not None and self.state is not EMPTY:
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if committed.expire_timestamp_ms is not None:
                if now_ms >= committed.expire_timestamp_ms:
                    expired.append(tp)
                continue
            base = (
                self.state_timestamp_ms
                if self.protocol_type is not None
                else committed.commit_timestamp_ms
            )
            if now_ms - base >= retention_ms:
                expired.append(tp)
        return expired

    def offsets_to_delete(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], list[TopicPartition]]:
        """OffsetDelete: the group's error, each partition's error, and what to tombstone.

        Kafka's rules: an Empty group may lose any offset; a ``consumer`` group with members
        may lose the offsets of topics none of its members subscribes to
        (GROUP_SUBSCRIBED_TO_TOPIC for the others); any other group with members answers
        NON_EMPTY_GROUP. A partition with no committed offset succeeds with nothing to write.
        """
        if self.state is DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}, []
        if self.state is not EMPTY and self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.NON_EMPTY_GROUP, {}, []
        consumed = frozenset[str]() if self.state is EMPTY else self.subscribed_topics()
        errors: dict[TopicPartition, ErrorCode] = {}
        eligible: list[TopicPartition] = []
        for tp in partitions:
            if consumed is None or tp.topic in consumed:
                errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            errors[tp] = ErrorCode.NONE
            if tp in self.offsets and tp not in eligible:
                eligible.append(tp)
        return ErrorCode.NONE, errors, eligible

    def subscribed_topics(self) -> frozenset[str] | None:
        """Every topic some member subscribes to, under the selected protocol; None when a
        subscription cannot be read (then every topic counts as subscribed)."""
        topics: set[str] = set()
        for m in self.members.values():
            one = subscribed_topics(m.metadata_for(self.protocol_name))
            if one is None:
                return None
            topics |= one
        return frozenset(topics)

    def mark_dead(self, now_ms: int) -> None:
        self._transition(DEAD, now_ms)
        self._join_deadline_ms = None
        self._sync_deadline_ms = None

    # --- views --------------------------------------------------------------------------------

    def describe(self) -> DescribedGroup:
        stable = self.state is STABLE
        return DescribedGroup(
            error_code=ErrorCode.NONE,
            group_id=self.group_id,
            group_state=self.state.value,
            protocol_type=self.protocol_type or "",
            protocol_data=(self.protocol_name or "") if stable else "",
            members=tuple(
                DescribedMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata_for(self.protocol_name) if stable else b"",
                    assignment=m.assignment if stable else b"",
                )
                for m in self.members.values()
            ),
        )

    def _transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalStateTransition(f"{self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.state_timestamp_ms = now_ms
