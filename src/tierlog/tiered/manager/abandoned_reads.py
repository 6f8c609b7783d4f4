"""Remote reads a Fetch stopped waiting for, kept for the next Fetch at the same offset.

A remote read not done within ``remote.fetch.max.wait.ms`` (or within
``remote.fetch.partial.wait.ms`` after other reads of its Fetch had records) leaves its
partition empty in that Fetch's response, as Kafka's DelayedRemoteFetch does, but the read
itself cannot be stopped: it waits in a reader thread for a chunk whose GET is in flight.
Kafka cancels the task without interrupting it and drops what it read, and the consumer's
next Fetch, at the same offset, starts a read of its own. Here that second read would find
no parked cursor (the first read still holds it), open a second stream over the segment,
and GET again every chunk the first stream's read-ahead has in flight. With eight
partitions read cold by one consumer, where 59 GETs in flight made each take 0.5-0.85 s, 19
of 147 chunk GETs were such repeats, and every repeat waited again.

So a read given up on is kept here, by partition and offset, until either

* the next Fetch at that offset takes it over and waits for it (``adopt``): with the same
  isolation level, whatever its byte budget (a partition's budget depends on its place in
  the request and on what the partitions before it left of the Fetch's ``max_bytes``, and
  only the first may take one batch over it, so two Fetches at one offset can ask
  different budgets; the manager gives the records back to the cursor when they do not fit
  the new one); or
* it completes first, and its result goes to ``unclaimed`` (the manager gives the records
  back to the cursor the read parked, parked again at the read's offset, so the next Fetch
  there is served them from memory).

An entry lives only while its read runs, so there are never more than the reader pool runs
and queues. A newer read given up on at the same offset replaces the older one, whose result
is then dropped. Thread-safe: reads complete on the reader pool, adoption happens on the
event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, TypeVar

from tierlog.tiered.api import TopicIdPartition

__all__ = ["AbandonedReads"]

T = TypeVar("T")
S = TypeVar("S")


class AbandonedReads(Generic[S, T]):
    """Reads given up on, keyed by (partition, offset); ``S`` is what a read was asked
    (passed back to ``unclaimed``), ``T`` its result."""

    def __init__(self, unclaimed: Callable[[S, T], None]) -> None:
        self._unclaimed = unclaimed
        self._lock = threading.Lock()
        self._kept: dict[tuple[TopicIdPartition, int], tuple[Hashable, S, Future[T]]] = {}

    def keep(
        self, tip: TopicIdPartition, offset: int, limits: Hashable, asked: S, read: Future[T]
    ) -> None:
        """``read`` (running) was given up on by its Fetch; ``limits`` are what another
        Fetch must ask for the same to take it over (its isolation level)."""
        key = (tip, offset)
        with self._lock:
            self._kept[key] = (limits, asked, read)
        read.add_done_callback(lambda done: self._settle(key, done))

    def adopt(
        self, tip: TopicIdPartition, offset: int, limits: Hashable
    ) -> tuple[S, Future[T]] | None:
        """The read given up on at ``offset`` with the same ``limits`` (what it was asked,
        and the read), now this caller's to wait for and no longer anyone else's; None if
        there is none."""
        key = (tip, offset)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0] != limits:
                return None
            del self._kept[key]
        return kept[1], kept[2]

    def _settle(self, key: tuple[TopicIdPartition, int], read: Future[T]) -> None:
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[2] is not read:
                return  # adopted, or replaced by a newer read at the same offset
            del self._kept[key]
        if read.cancelled() or read.exception() is not None:
            return
        self._unclaimed(kept[1], read.result())

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)
