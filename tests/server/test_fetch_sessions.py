"""Kafka's fetch session rules (KIP-227) at unit level: epochs, errors, incremental
responses, eviction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.fetch_response import FetchPartition, FetchTopic
from tierlog.server.fetch_sessions import (
    INVALID_SESSION_ID,
    QUIET_PARTITION_RECHECK_MS,
    ContextKind,
    FetchContext,
    FetchSessionCache,
    next_epoch,
)
from tierlog.server.purgatory import FetchPurgatory

_NIL = uuid.UUID(int=0)
#: The purgatory whose notifications the sessions see.
PURGATORY = FetchPurgatory()


@dataclass
class P:
    partition: int
    fetch_offset: int = 0
    partition_max_bytes: int = 1 << 20
    current_leader_epoch: int = -1


@dataclass
class T:
    topic: str
    partitions: list[Any] = field(default_factory=list)
    topic_id: uuid.UUID = _NIL


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _names(t: Any) -> tuple[str, uuid.UUID]:
    return t.topic, _NIL


def _ctx(
    cache: FetchSessionCache,
    sid: int,
    epoch: int,
    topics: list[T],
    forgotten: list[T] | None = None,
    *,
    privileged: bool = False,
    ids: bool = False,
) -> FetchContext:
    return cache.new_context(
        sid,
        epoch,
        topics,
        forgotten or [],
        privileged=privileged,
        uses_topic_ids=ids,
        names=_names,
        changes=PURGATORY.changes,
    )


def _answer(
    topics: Any, hw: int = 10, records: set[tuple[str, int]] | None = None
) -> list[FetchTopic]:
    """What reading ``topics`` found: HW ``hw``, and records for each of ``records``."""
    out = []
    for t in topics:
        ft = FetchTopic(t.topic, t.topic_id)
        for p in t.partitions:
            fp = FetchPartition(p.partition, 0, hw, hw, 0)
            if records and (t.topic, p.partition) in records:
                fp.records = [b"x" * 10]
                fp.records_size = 10
            ft.partitions.append(fp)
        out.append(ft)
    return out


def _open(cache: FetchSessionCache, n: int = 3, *, privileged: bool = False) -> int:
    topics = [T("a", [P(i) for i in range(n)])]
    ctx = _ctx(cache, 0, 0, topics, privileged=privileged)
    assert ctx.kind is ContextKind.FULL
    _, sid, err = ctx.respond(_answer(topics))
    assert err is ErrorCode.NONE
    return sid


def _parts(topics: list[FetchTopic]) -> list[tuple[str, int]]:
    return [(t.name, p.partition_index) for t in topics for p in t.partitions]


def test_epoch_zero_creates_a_session_and_epochs_advance() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache)
    assert sid != INVALID_SESSION_ID and len(cache) == 1 and cache.partitions_cached == 3
    for epoch in (1, 2, 3):
        ctx = _ctx(cache, sid, epoch, [])
        assert ctx.kind is ContextKind.INCREMENTAL
        _, got, err = ctx.respond(_answer(ctx.topics))
        assert (got, err) == (sid, ErrorCode.NONE)


def test_unknown_session_id_and_wrong_epoch_are_errors_without_partitions() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache)
    ctx = _ctx(cache, sid + 1, 1, [])
    assert (ctx.kind, ctx.error) == (ContextKind.ERROR, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert ctx.respond([]) == ([], INVALID_SESSION_ID, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    ctx = _ctx(cache, sid, 2, [])
    assert (ctx.kind, ctx.error) == (ContextKind.ERROR, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert _ctx(cache, sid, 1, []).kind is ContextKind.INCREMENTAL  # the session survives
    topic_ids = _ctx(cache, sid, 2, [], ids=True)
    assert topic_ids.error is ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_final_epoch_closes_the_session_and_stays_sessionless() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache)
    topics = [T("a", [P(0)])]
    ctx = _ctx(cache, sid, -1, topics)
    assert ctx.kind is ContextKind.SESSIONLESS and len(cache) == 0
    assert ctx.respond(_answer(topics))[1] == INVALID_SESSION_ID
    assert _ctx(cache, sid, 1, []).error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_full_request_naming_a_session_replaces_it() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache)
    ctx = _ctx(cache, sid, 0, [T("a", [P(0)])])
    assert len(cache) == 0
    new = ctx.respond(_answer(ctx.topics))[1]
    assert new not in (sid, INVALID_SESSION_ID) and len(cache) == 1


def test_incremental_responses_carry_only_partitions_with_news() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache, 3)
    ctx = _ctx(cache, sid, 1, [])
    assert _parts(ctx.respond(_answer(ctx.topics))[0]) == []  # nothing changed
    ctx = _ctx(cache, sid, 2, [])
    assert _parts(ctx.respond(_answer(ctx.topics, records={("a", 1)}))[0]) == [("a", 1)]
    ctx = _ctx(cache, sid, 3, [])
    out = _parts(ctx.respond(_answer(ctx.topics, hw=11))[0])
    assert sorted(out) == [("a", 0), ("a", 1), ("a", 2)]  # a moved HW is news
    ctx = _ctx(cache, sid, 4, [])
    answer = _answer(ctx.topics, hw=11)
    failing = next(p for p in answer[0].partitions if p.partition_index == 2)
    failing.error_code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert _parts(ctx.respond(answer)[0]) == [("a", 2)]
    ctx = _ctx(cache, sid, 5, [])  # the error is gone: the partition is sent once more
    assert _parts(ctx.respond(_answer(ctx.topics, hw=11))[0]) == [("a", 2)]


def test_partitions_with_records_move_to_the_end_of_the_session() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache, 3)
    ctx = _ctx(cache, sid, 1, [])
    ctx.respond(_answer(ctx.topics, records={("a", 0)}))
    ctx = _ctx(cache, sid, 2, [])
    assert [p.partition for t in ctx.topics for p in t.partitions] == [1, 2, 0]


def test_added_updated_and_forgotten_partitions() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache, 2)
    ctx = _ctx(cache, sid, 1, [T("b", [P(0, 5)]), T("a", [P(1, 7)])], [T("a", [0])])
    read = [(t.topic, p.partition, p.fetch_offset) for t in ctx.topics for p in t.partitions]
    assert read == [("a", 1, 7), ("b", 0, 5)]
    assert cache.partitions_cached == 2
    out = _parts(ctx.respond(_answer(ctx.topics))[0])
    assert out == [("b", 0)]  # new to the session: its first answer is news


def test_forgetting_every_partition_closes_the_session() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache, 1)
    ctx = _ctx(cache, sid, 1, [], [T("a", [0])])
    assert ctx.kind is ContextKind.SESSIONLESS and len(cache) == 0


def test_a_duplicate_request_answers_invalid_epoch() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    sid = _open(cache)
    first = _ctx(cache, sid, 1, [])
    second = _ctx(cache, sid, 2, [])
    assert first.respond(_answer(first.topics))[2] is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert second.respond(_answer(second.topics))[2] is ErrorCode.NONE


def test_zero_slots_never_creates_a_session() -> None:
    cache = FetchSessionCache(0, 120_000, Clock())
    topics = [T("a", [P(0)])]
    ctx = _ctx(cache, 0, 0, topics)
    out, sid, err = ctx.respond(_answer(topics))
    assert (sid, err, len(cache)) == (INVALID_SESSION_ID, ErrorCode.NONE, 0)
    assert _parts(out) == [("a", 0)]


def test_young_sessions_are_not_evicted_by_consumers() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock)
    _open(cache, 5)
    _open(cache, 5)
    clock.now += 1000
    assert _open(cache, 50) == INVALID_SESSION_ID
    assert cache.evictions == 0


def test_a_stale_session_is_evicted_first() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock)
    stale = _open(cache, 50)
    clock.now += 60_000
    busy = _open(cache, 50)
    clock.now += 60_001
    assert _open(cache, 1) not in (INVALID_SESSION_ID,)
    assert cache.get(stale) is None and cache.get(busy) is not None
    assert cache.evictions == 1


def test_an_old_smaller_session_gives_way_to_a_bigger_one() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock)
    small = _open(cache, 2)
    big = _open(cache, 20)
    clock.now += 120_001
    for sid, epoch in ((small, 1), (big, 1)):  # used recently, but older than the eviction time
        _ctx(cache, sid, epoch, [])
    assert _open(cache, 1) == INVALID_SESSION_ID  # smaller than any: evicts none
    assert _open(cache, 10) != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None


def test_a_replica_session_evicts_a_young_consumer_session_but_not_a_replica() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock)
    replica = _open(cache, 100, privileged=True)
    consumer = _open(cache, 100)
    clock.now += 10
    follower = _open(cache, 1, privileged=True)
    assert follower != INVALID_SESSION_ID
    assert cache.get(consumer) is None and cache.get(replica) is not None
    assert _open(cache, 1, privileged=True) == INVALID_SESSION_ID  # replicas only: none goes
    assert _open(cache, 1000) == INVALID_SESSION_ID  # nor for a consumer


def test_next_epoch_wraps_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(0x7FFFFFFF) == 1 and next_epoch(-1) == -1


def _read(ctx: FetchContext) -> list[tuple[str, int]]:
    return [(t.topic, p.partition) for t in ctx.topics for p in t.partitions]


def test_quiet_partitions_are_read_again_only_when_notified_or_at_the_recheck() -> None:
    clock = Clock()
    cache = FetchSessionCache(10, 120_000, clock)
    topics = [T("q", [P(i, fetch_offset=10) for i in range(3)])]  # caught up at HW 10
    ctx = _ctx(cache, 0, 0, topics)
    sid = ctx.respond(_answer(topics))[1]
    ctx = _ctx(cache, sid, 1, [])
    assert _read(ctx) == [] and ctx.wait_keys == {("q", None)}
    assert ctx.respond([]) == ([], sid, ErrorCode.NONE)
    PURGATORY.notify(("q", 1))  # an append to q-1
    ctx = _ctx(cache, sid, 2, [])
    assert _read(ctx) == [("q", 1)]
    out = ctx.respond(_answer(ctx.topics, hw=11, records={("q", 1)}))[0]
    assert _parts(out) == [("q", 1)]
    ctx = _ctx(cache, sid, 3, [T("q", [P(1, fetch_offset=11)])])  # the client moved on
    assert _read(ctx) == [("q", 1)]
    ctx.respond(_answer(ctx.topics, hw=11))
    assert _read(_ctx(cache, sid, 4, [])) == []
    clock.now += QUIET_PARTITION_RECHECK_MS
    ctx = _ctx(cache, sid, 5, [])
    assert sorted(_read(ctx)) == [("q", 0), ("q", 1), ("q", 2)]


def test_a_partition_read_before_a_wait_is_read_again_after_it() -> None:
    cache = FetchSessionCache(10, 120_000, Clock())
    topics = [T("w", [P(i, fetch_offset=10) for i in range(2)])]
    ctx = _ctx(cache, 0, 0, topics)
    sid = ctx.respond(_answer(topics))[1]
    PURGATORY.notify(("w", 0))
    ctx = _ctx(cache, sid, 1, [])
    assert _read(ctx) == [("w", 0)]
    PURGATORY.notify(("w", 1))  # woken by another append
    assert ctx.reread()
    assert _read(ctx) == [("w", 0), ("w", 1)]
