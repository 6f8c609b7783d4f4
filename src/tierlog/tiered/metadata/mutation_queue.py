"""The mutations of the topic-based RLMM between the caller and the caller's future.

A mutation (segment add or update, partition delete) waits in its user partition's queue,
is taken by the publisher (at most one **in flight** per user partition, so validation sees
the cache as the event will find it), gets its metadata-topic offset once appended, and
completes when the consumer has applied that offset, or when the partition is not assigned
here at all. A mutation whose ``remote.log.metadata.consume.wait.ms`` runs out first fails
with a retriable error.

The queue is shared by the manager (which adds), the publisher and the consumer; every
method is called with the manager's one lock held. The caller completes the futures of the
mutations a method returns (``succeed``, ``fail``) after releasing the lock; ``expire``
fails its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from tierlog.tiered.api import (
    RemoteStorageException,
    RetriableRemoteStorageException,
    TopicIdPartition,
)
from tierlog.tiered.metadata.serde import MetadataRecord

__all__ = ["Mutation", "MutationQueue", "fail", "succeed"]


@dataclass(slots=True)
class Mutation:
    tip: TopicIdPartition
    record: MetadataRecord
    future: Future[None]
    deadline: float
    offset: int = -1  # set once appended


class MutationQueue:
    def __init__(self) -> None:
        self._pending: dict[TopicIdPartition, deque[Mutation]] = {}
        self._inflight: dict[TopicIdPartition, Mutation] = {}

    def add(self, m: Mutation) -> None:
        self._pending.setdefault(m.tip, deque()).append(m)

    def take(self, may_publish: Callable[[TopicIdPartition], bool]) -> Mutation | None:
        """Remove the first queued mutation whose partition has none in flight and may
        publish; None if there is none. The caller starts it (``start``) unless the caller's
        future was cancelled."""
        for tip, queue in self._pending.items():
            if queue and tip not in self._inflight and may_publish(tip):
                m = queue.popleft()
                if not queue:
                    del self._pending[tip]
                return m
        return None

    def start(self, m: Mutation) -> None:
        self._inflight[m.tip] = m

    def in_flight(self, tip: TopicIdPartition) -> Mutation | None:
        return self._inflight.get(tip)

    def forget(self, m: Mutation) -> None:
        """``m`` failed to publish; its partition may publish the next one."""
        if self._inflight.get(m.tip) is m:
            del self._inflight[m.tip]

    def finish(self, tip: TopicIdPartition) -> Mutation | None:
        """Remove and return the partition's in-flight mutation, if any."""
        return self._inflight.pop(tip, None)

    def finish_consumed(
        self, tips: Iterable[TopicIdPartition], position: Callable[[TopicIdPartition], int]
    ) -> list[Mutation]:
        """Remove the in-flight mutations the consumer has applied: appended at an offset
        below their partition's ``position``."""
        done: list[Mutation] = []
        for tip in tips:
            m = self._inflight.get(tip)
            if m is not None and 0 <= m.offset < position(tip):
                done.append(self._inflight.pop(tip))
        return done

    def drain(self, *, in_flight: bool) -> list[Mutation]:
        """Remove every queued mutation, and with ``in_flight`` the in-flight ones too."""
        doomed = [m for q in self._pending.values() for m in q]
        self._pending.clear()
        if in_flight:
            doomed += list(self._inflight.values())
            self._inflight.clear()
        return doomed

    def next_wait(self, now: float) -> float:
        """Seconds until the nearest deadline, between 1 ms and 1 s."""
        deadlines = [q[0].deadline for q in self._pending.values() if q]
        deadlines += [m.deadline for m in self._inflight.values()]
        nearest = min(deadlines, default=now + 1.0)
        return min(max(nearest - now, 0.001), 1.0)

    def expire(self, now: float, timeout_ms: int) -> bool:
        """Fail the mutations whose wait ran out; True if any did."""
        expired: list[tuple[Mutation, RemoteStorageException]] = []
        for tip, queue in list(self._pending.items()):
            while queue and queue[0].deadline <= now:
                expired.append(
                    (
                        queue.popleft(),
                        RetriableRemoteStorageException(
                            f"timed out after {timeout_ms} ms waiting for the remote log "
                            f"metadata of {tip} to load"
                        ),
                    )
                )
            if not queue:
                del self._pending[tip]
        for tip, m in list(self._inflight.items()):
            if m.offset >= 0 and m.deadline <= now:
                del self._inflight[tip]
                expired.append(
                    (
                        m,
                        RetriableRemoteStorageException(
                            f"timed out after {timeout_ms} ms waiting for own metadata event "
                            f"at offset {m.offset} of {tip} to be consumed"
                        ),
                    )
                )
        for m, err in expired:
            fail([m], err)
        return bool(expired)


def succeed(ms: list[Mutation]) -> None:
    for m in ms:
        if not m.future.done():
            m.future.set_result(None)


def fail(ms: list[Mutation], err: BaseException) -> None:
    for m in ms:
        if not m.future.done():
            m.future.set_exception(err)
