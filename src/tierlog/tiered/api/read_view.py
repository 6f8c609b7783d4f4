"""Optional stream capability: handing out the next bytes of a segment without copying them."""

from __future__ import annotations

import abc
from collections.abc import Callable


class SupportsReadView(abc.ABC):
    """A stream from ``RemoteStorageManager.fetch_log_segment`` that can lend its buffer.

    A stream declares the capability by inheriting this class; callers check it with
    ``isinstance``. Without it, callers copy with ``readinto``.

    Contract: ``read_view(n)`` returns the next ``min(n, what is left)`` bytes or fewer (it
    stops where the stream's own buffer ends, e.g. a chunk boundary, and is empty only at
    the end) as a read-only view of a buffer the stream will not write again, and consumes
    them. The view stays valid after the stream is closed. Mixing ``read_view`` with the
    stream's other read methods is allowed: they consume from the same position.
    """

    @abc.abstractmethod
    def read_view(self, n: int) -> memoryview:
        """Up to ``n`` next bytes, consumed, without a copy; empty only at the end."""

    def read_view_now(self, n: int) -> memoryview | None:
        """``read_view(n)`` if it can answer without waiting for the store (the rest of the
        buffer the stream holds, or a next buffer already loaded), else None with nothing
        consumed. The broker calls it on its event loop, so it must not block; this default
        never knows, so a Fetch that needs the next buffer goes to a reader thread."""
        return None

    def when_readable(self, callback: Callable[[], None]) -> bool:
        """Arrange for ``callback`` to be called once, on any thread, when the load that
        ``read_view_now`` is waiting for ends (landed or failed); True if arranged. False,
        with nothing arranged, when no such load is in flight (nothing is loading, or the
        stream cannot tell): the caller then reads on a thread that may wait. The broker
        calls it on its event loop, so it must not block; this default never arranges."""
        return False
