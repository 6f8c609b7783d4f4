"""Incremental fetch sessions (KIP-227): the broker's ``FetchSessionCache`` and its rules.

A client that fetches many partitions opens a session with a full Fetch at epoch 0
(``INITIAL_EPOCH``); the broker answers with a session id, and the client then sends only
what changed (partitions added, offsets moved, ``forgotten_topics_data`` removed) under
epoch 1, 2, ... The broker reads every partition of the session and answers only those
with something new: records, a moved high watermark, last stable offset or log start
offset, or an error. An idle consumer of 1,000 partitions thus sends and receives a few
bytes per poll instead of 1,000 partitions each way.

Rules, as in Kafka's ``FetchManager.newContext``:

- epoch 0 or -1 (``FINAL_EPOCH``) is a full request: a session id it names is closed first.
  Epoch -1 stays sessionless (session id 0 in the response); epoch 0 asks for a new session,
  which the cache grants if it has a free slot or can evict one, else answers id 0.
- any other epoch is incremental: an unknown id answers FETCH_SESSION_ID_NOT_FOUND, an
  epoch other than the session's answers INVALID_FETCH_SESSION_EPOCH, a request whose
  Fetch version disagrees with the session on topic ids (v13+) answers
  FETCH_SESSION_TOPIC_ID_ERROR. These errors carry no partitions and session id 0; the
  client then starts over with a full request. A session left with no partition is closed
  and the request answered sessionless.
- a partition with records in the response moves to the end of the session's order, so
  that the ``max_bytes`` of later requests serves every partition in turn.

What an idle session costs: a partition whose last answer had no records and no error, with
the client's fetch offset at the high watermark, is quiet. Kafka reads every partition of a
session on every request; here a quiet partition is read again only once the purgatory has
been notified for it (an append, a deletion) or every ``QUIET_PARTITION_RECHECK_MS`` (for
log start offset moves, which notify nobody). Leaving it out answers exactly what reading it
would: nothing new. And an incremental fetch waits under its topics' keys, not one key per
partition. A consumer polling 1,000 idle partitions thus costs a few dictionary lookups per
partition and request.

Eviction, as in Kafka's ``FetchSessionCache``: the cache holds at most
``max.incremental.fetch.session.cache.slots`` sessions. A new session finding it full
first evicts the least recently used session if that one has been unused for more than
``min.incremental.fetch.session.eviction.ms``. Otherwise it may evict the lowest ranked
evictable session, ranked by (privileged, size, id): a session is evictable by anyone once
it is older than the eviction time, and a session of a replica (privileged) may also evict
any consumer's session at once. A new consumer session evicts only an older one of fewer
partitions, never a replica's that is still young. With 0 slots no session is ever created
and every Fetch is answered as a full one.

The cache is owned by the broker (``BrokerState.fetch_sessions``); it holds no task or I/O,
only the sessions, bounded by the slot count. It runs on the event loop only.
"""

from __future__ import annotations

import enum
import random
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.fetch_response import FetchPartition, FetchTopic
from tierlog.server.purgatory import topic_key

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 0x7FFFFFFF

#: Kafka's fixed time before a session may be evicted for being old (not a config key there).
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000

#: How long a quiet partition may go unread: log start offset moves (retention,
#: DeleteRecords) notify no fetch, and reach an incremental response within this time.
QUIET_PARTITION_RECHECK_MS = 5000

#: A request topic (or forgotten topic) to its (name, topic id); one of the two may be blank.
_Names = Callable[[Any], tuple[str, uuid.UUID]]

#: A partition's key in a session: (topic id, partition) with topic ids, else (name, partition).
SessionKey = tuple[uuid.UUID | str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: wraps from 2^31 - 1 to 1, and stays final once final."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the client's last request parameters, and what the
    broker last answered for it (to tell whether the next answer has news).

    The request fields carry the request schema's names so that the Fetch handler resolves
    session partitions and request partitions alike. ``topic`` is the name (with topic ids:
    the name it had when last read, "" before), which keys the partition in the purgatory.
    """

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int = 0
    partition_max_bytes: int = 0
    current_leader_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    #: Caught up, nothing to say at the last answer: not read again until notified.
    quiet: bool = False
    #: The purgatory's notification count of this partition when it was last read.
    seen: int = -1

    def update_request(self, p: Any) -> None:
        self.fetch_offset = int(p.fetch_offset)
        self.partition_max_bytes = int(p.partition_max_bytes)
        self.current_leader_epoch = int(getattr(p, "current_leader_epoch", -1))
        self.quiet = False

    def must_respond(self, fp: FetchPartition) -> bool:
        """Whether ``fp`` goes into an incremental response; records what it told the client.

        An error also forgets the high watermark, so the partition is sent again once the
        error is gone. A partition left with no records, no error and its fetch offset at
        the high watermark becomes quiet.
        """
        respond = fp.records_size > 0 or fp.preferred_read_replica != -1
        if fp.high_watermark != self.high_watermark:
            respond = True
            self.high_watermark = fp.high_watermark
        if fp.last_stable_offset != self.last_stable_offset:
            respond = True
            self.last_stable_offset = fp.last_stable_offset
        if fp.log_start_offset != self.log_start_offset:
            respond = True
            self.log_start_offset = fp.log_start_offset
        if fp.error_code != 0:
            respond = True
            self.high_watermark = -1
        self.quiet = (
            fp.error_code == 0 and fp.records_size == 0 and self.fetch_offset >= fp.high_watermark
        )
        return respond


@dataclass(slots=True)
class SessionTopic:
    """A run of consecutive session partitions of one topic, as the handler reads them."""

    topic: str
    topic_id: uuid.UUID
    partitions: list[CachedPartition]


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[SessionKey, CachedPartition] = field(default_factory=dict)
    #: The size the cache last accounted for this session (-1: not yet).
    cached_size: int = -1
    #: When every partition, quiet or not, was last read.
    last_sweep_ms: int = 0
    #: The purgatory's notification count of each topic at the last ``to_read``.
    topics_seen: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.partitions)

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def key(self, topic: str, topic_id: uuid.UUID, partition: int) -> SessionKey:
        return (topic_id if self.uses_topic_ids else topic, partition)

    def update(self, topics: Iterable[Any], forgotten: Iterable[Any], names: _Names) -> None:
        """Apply an incremental request: add or update its partitions, drop the forgotten."""
        for t in topics:
            name, tid = names(t)
            for p in t.partitions:
                k = self.key(name, tid, int(p.partition))
                part = self.partitions.get(k)
                if part is None:
                    part = self.partitions[k] = CachedPartition(name, tid, int(p.partition))
                part.update_request(p)
        for t in forgotten:
            name, tid = names(t)
            for idx in t.partitions:
                self.partitions.pop(self.key(name, tid, int(idx)), None)

    def to_read(
        self, changes: Callable[[Hashable], int], sweep: bool
    ) -> tuple[list[SessionTopic], set[Hashable]]:
        """The partitions the next read covers, in session order and in runs of one topic,
        and the purgatory keys that announce a change to any partition of the session.

        A quiet partition is left out unless the purgatory has been notified for it since it
        was read, or ``sweep`` asks for every partition. Whatever is read stops being quiet
        until its answer says otherwise, so a re-read after a wait covers it again. A topic
        none of whose partitions was notified since the last look (one count per topic) has
        its quiet partitions skipped without a look at each.
        """
        out: list[SessionTopic] = []
        keys: set[Hashable] = set()
        by_id = self.uses_topic_ids
        seen_topics = self.topics_seen
        looked: dict[str, int] = {}
        last: SessionTopic | None = None
        last_topic: str | None = None
        moved = True
        for part in self.partitions.values():
            if part.topic != last_topic:
                last_topic = part.topic
                tkey = topic_key(part.topic)
                keys.add(tkey)
                count = looked[part.topic] = changes(tkey)
                moved = seen_topics.get(part.topic) != count
            if (
                part.quiet
                and not sweep
                and (not moved or changes((part.topic, part.partition)) == part.seen)
            ):
                continue
            part.quiet = False
            if last is not None and (
                last.topic_id == part.topic_id if by_id else last.topic == part.topic
            ):
                last.partitions.append(part)
            else:
                last = SessionTopic(part.topic, part.topic_id, [part])
                out.append(last)
        self.topics_seen = looked
        return out, keys


class ContextKind(enum.Enum):
    ERROR = "error"
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"


@dataclass
class FetchContext:
    """How one Fetch is answered with respect to sessions; built by ``FetchSessionCache``.

    ``topics`` is what the handler reads (the request's topics, or the session's partitions
    that may have news); ``wait_keys``, when set, are the purgatory keys to wait under
    instead of the partitions read; ``reread`` refreshes ``topics`` after a wait; ``respond``
    turns what was read into the response's topics and session id.
    """

    kind: ContextKind
    cache: FetchSessionCache
    topics: Sequence[Any] = ()
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    privileged: bool = False
    uses_topic_ids: bool = False
    #: The session epoch this request moved the session to (incremental only).
    expected_epoch: int = 0
    wait_keys: set[Hashable] | None = None
    changes: Callable[[Hashable], int] | None = None

    def reread(self) -> bool:
        """After a wait: refresh what an incremental fetch reads; True if it changed."""
        if self.kind is not ContextKind.INCREMENTAL:
            return False
        assert self.session is not None and self.changes is not None
        self.topics, self.wait_keys = self.session.to_read(self.changes, False)
        return True

    def respond(self, read: list[FetchTopic]) -> tuple[list[FetchTopic], int, ErrorCode]:
        """(topics, session id, top-level error) of the response to send."""
        if self.kind is ContextKind.FULL:
            assert self.changes is not None
            sid = self.cache.maybe_create(
                self.privileged, self.uses_topic_ids, self.topics, read, self.changes
            )
            return read, sid, ErrorCode.NONE
        if self.kind is not ContextKind.INCREMENTAL:
            return read, INVALID_SESSION_ID, self.error
        session = self.session
        assert session is not None and self.changes is not None
        if session.epoch != self.expected_epoch:
            return [], session.id, ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return _select(session, self.topics, read, self.changes), session.id, ErrorCode.NONE

    def throttled(self) -> tuple[int, ErrorCode]:
        """(session id, top-level error) of the empty answer a throttled Fetch gets (Kafka's
        ``getThrottledResponse``): a full request creates no session and an incremental
        one leaves its session as it was, so nothing counts as sent."""
        if self.kind is ContextKind.INCREMENTAL:
            session = self.session
            assert session is not None
            if session.epoch != self.expected_epoch:
                return session.id, ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return session.id, ErrorCode.NONE
        if self.kind is ContextKind.ERROR:
            return INVALID_SESSION_ID, self.error
        return INVALID_SESSION_ID, ErrorCode.NONE


def _select(
    session: FetchSession,
    topics: Sequence[Any],
    read: list[FetchTopic],
    changes: Callable[[Hashable], int],
) -> list[FetchTopic]:
    """The partitions of an incremental response; those with records go last in the session.

    Runs with no await since the read reported its high watermarks, so the notification
    count taken here goes with them: a later append is a later notification."""
    out: list[FetchTopic] = []
    served: list[SessionKey] = []
    for st, ft in zip(topics, read, strict=True):
        kept: list[FetchPartition] = []
        for part, fp in zip(st.partitions, ft.partitions, strict=True):
            part.topic = ft.name
            part.seen = changes((ft.name, part.partition))
            if part.must_respond(fp):
                kept.append(fp)
                if fp.records_size > 0:
                    served.append(session.key(ft.name, part.topic_id, part.partition))
        if kept:
            out.append(FetchTopic(ft.name, ft.topic_id, kept))
    for k in served:
        part = session.partitions.pop(k, None)
        if part is not None:
            session.partitions[k] = part
    return out


class FetchSessionCache:
    """The broker's fetch sessions, at most ``max_slots``, with Kafka's eviction rules."""

    def __init__(
        self,
        max_slots: int,
        eviction_ms: int,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock_ms or (lambda: int(time.monotonic() * 1000))
        self._sessions: dict[int, FetchSession] = {}
        self._rng = random.Random()
        self.evictions = 0
        self.partitions_cached = 0
        self.incremental_fetches = 0
        self.full_fetches = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None and session.cached_size >= 0:
            self.partitions_cached -= session.cached_size
        return session

    def close(self) -> None:
        """Drop every session (broker shutdown)."""
        self._sessions.clear()
        self.partitions_cached = 0

    def touch(self, session: FetchSession, now: int) -> None:
        session.last_used_ms = now
        if session.cached_size >= 0:
            self.partitions_cached -= session.cached_size
        session.cached_size = session.size
        self.partitions_cached += session.cached_size

    # ---- contexts ------------------------------------------------------------------------
    def new_context(
        self,
        session_id: int,
        epoch: int,
        topics: Sequence[Any],
        forgotten: Iterable[Any],
        *,
        privileged: bool,
        uses_topic_ids: bool,
        names: _Names,
        changes: Callable[[Hashable], int],
    ) -> FetchContext:
        """The context of one Fetch; ``names`` gives a request topic's (name, id),
        ``changes`` the purgatory's notification count of a (topic, partition)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.full_fetches += 1
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(ContextKind.SESSIONLESS, self, topics)
            return FetchContext(
                ContextKind.FULL,
                self,
                topics,
                privileged=privileged,
                uses_topic_ids=uses_topic_ids,
                changes=changes,
            )
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.ERROR, self, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(
                ContextKind.ERROR, self, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH
            )
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(
                ContextKind.ERROR, self, error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
            )
        session.update(topics, forgotten, names)
        if not session.partitions:
            self.remove(session.id)
            return FetchContext(ContextKind.SESSIONLESS, self, topics)
        self.incremental_fetches += 1
        now = self._clock()
        self.touch(session, now)
        session.epoch = next_epoch(session.epoch)
        sweep = now - session.last_sweep_ms >= QUIET_PARTITION_RECHECK_MS
        if sweep:
            session.last_sweep_ms = now
        topics, keys = session.to_read(changes, sweep)
        return FetchContext(
            ContextKind.INCREMENTAL,
            self,
            topics,
            session=session,
            expected_epoch=session.epoch,
            wait_keys=keys,
            changes=changes,
        )

    # ---- creation and eviction -------------------------------------------------------------
    def maybe_create(
        self,
        privileged: bool,
        uses_topic_ids: bool,
        topics: Sequence[Any],
        read: list[FetchTopic],
        changes: Callable[[Hashable], int],
    ) -> int:
        """A new session holding the partitions of a full request, with what ``read``
        answered for them; its id, or 0 when no slot is free and none may be evicted."""
        size = sum(len(t.partitions) for t in topics)
        now = self._clock()
        if len(self._sessions) >= self.max_slots and not self._try_evict(privileged, size, now):
            return INVALID_SESSION_ID
        session = FetchSession(
            self._new_id(), privileged, uses_topic_ids, now, now, next_epoch(INITIAL_EPOCH)
        )
        session.last_sweep_ms = now
        for t, ft in zip(topics, read, strict=True):
            for p, fp in zip(t.partitions, ft.partitions, strict=True):
                part = CachedPartition(ft.name, ft.topic_id, int(p.partition))
                part.update_request(p)
                part.must_respond(fp)
                part.seen = changes((ft.name, part.partition))
                session.partitions[session.key(ft.name, ft.topic_id, part.partition)] = part
        self._sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, _MAX_EPOCH - 1)
            if sid not in self._sessions:
                return sid

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a new session of ``size`` partitions, if Kafka's rules allow.

        A linear scan: it runs only when a session is created while every slot is taken."""
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        candidates = [
            s for s in self._sessions.values() if self._old(s) or (privileged and not s.privileged)
        ]
        if not candidates:
            return False
        lowest = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < lowest.evictable_key():
            return False
        self._evict(lowest)
        return True

    def _old(self, session: FetchSession) -> bool:
        """Evictable by any new session: older than the eviction time when last used."""
        return session.last_used_ms - session.creation_ms > self.eviction_ms

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.evictions += 1
