"""``queued.max.request.bytes``: the bytes of requests read but not yet handled, broker-wide.

Kafka's network threads take each request's buffer from a memory pool of this size and stop
reading from a connection while the pool cannot give it one, so a crowd of clients sending
large requests faster than they are handled cannot run the broker out of memory. tierlog
reads whole frames through asyncio, so the bound is kept after the fact: the frames a read
completes are counted when they are queued on their connection, a connection whose frames
take the count over the bound stops reading, and so does every connection that queues more
while it is over; each frame is taken off the count when its handler starts (a request being
handled is no longer queued, as in Kafka once it has left the request queue, so requests
that wait for others, an acks=all Produce for its followers' fetches, never hold the pool
against the requests they wait for). Stopped connections read again, all of them, once the
count is back within the bound. A read can therefore overshoot the bound by what one
connection's last read completed: at most ``socket.request.max.bytes`` plus one socket read.

-1 (Kafka's default) counts nothing. The count is exported as
``tierlog_queued_request_bytes``.
"""

from __future__ import annotations

from collections.abc import Callable


class QueuedRequestBytes:
    """The broker-wide count; owned by the broker, shared by its connections (event loop
    only: no lock)."""

    __slots__ = ("_limit", "_waiting", "used")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.used = 0
        self._waiting: dict[object, Callable[[], None]] = {}

    @property
    def bounded(self) -> bool:
        return self._limit >= 0

    def add(self, n: int) -> bool:
        """Count ``n`` queued bytes; True if the count is now over the bound (the caller
        stops reading and ``wait``s)."""
        if self._limit < 0:
            return False
        self.used += n
        return self.used > self._limit

    def remove(self, n: int) -> None:
        """``n`` bytes left the queue; the waiting connections read again once the count
        is within the bound."""
        if self._limit < 0:
            return
        self.used = max(self.used - n, 0)
        if self.used <= self._limit and self._waiting:
            waiting, self._waiting = self._waiting, {}
            for resume in waiting.values():
                resume()

    def wait(self, owner: object, resume: Callable[[], None]) -> None:
        """Call ``resume`` once the count is within the bound (``owner``: the connection,
        to ``forget`` it if it closes first)."""
        self._waiting[owner] = resume

    def forget(self, owner: object) -> None:
        self._waiting.pop(owner, None)


UNBOUNDED = QueuedRequestBytes(-1)
"""The count of a broker with ``queued.max.request.bytes=-1``, and of connections built
without one (tests)."""
