"""A chunk GET that a reader can start on before it completes.

The first read of a segment after a restart waits for its first chunk. A chunk is 4 MiB by
default and the batch the Fetch needs is usually its first few hundred KiB, so waiting for
the whole chunk adds the transfer of the rest of it to the consumer's first byte. A GET
received into a pool slot (``direct_get``) writes the slot front to back, and the bytes it
has written are final: the object is immutable and TCP delivers in order. So the reader
can be handed the bytes received so far, and more as they come.

Only a chunk stored as is (no compression, no encryption) can be read this way: a
compressed chunk is decoded whole, and an encrypted one must not be released before its
authentication tag is checked. The GET's own result is unchanged: its caller still gets the
whole chunk (or its error), and whatever was handed out early is a prefix of that.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future


class Arriving:
    """The receive buffer of one GET in flight, and how much of it is filled.

    Written by the GET's thread (``started``, ``received``, ``ended``) and read by one
    reader (``wait``, ``now``). ``length`` is the byte count the GET asks for, known before
    it starts, so a reader can tell whether it covers the chunk it wants."""

    def __init__(self, length: int) -> None:
        self.length = length
        self._cond = threading.Condition(threading.Lock())
        self._view: memoryview | None = None
        self._filled = 0
        self._ended = False
        self._on_end: list[Callable[[], None]] = []
        #: The whole load's result, when the GET was started for the one stream that reads
        #: it: that stream takes the chunk, or the load's error, from here once the GET has
        #: ended, instead of loading it again.
        self.outcome: Future[bytes | memoryview] | None = None

    # -- the GET's side ------------------------------------------------------------------

    def started(self, view: memoryview) -> None:
        """The GET's response is good (status and range checked) and its body will be
        received into ``view``, from its first byte on."""
        with self._cond:
            self._view = view.toreadonly()

    def received(self, filled: int) -> None:
        """``view[:filled]`` now holds the body's first ``filled`` bytes."""
        with self._cond:
            self._filled = filled
            self._cond.notify_all()

    def ended(self) -> None:
        """The GET finished, whole or failed (or was cancelled before it started): no more
        bytes will arrive here."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()
            callbacks, self._on_end = self._on_end, []
        for callback in callbacks:
            callback()

    def when_ended(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the GET has ended (now, if it has), in the thread that
        ends it."""
        with self._cond:
            if not self._ended:
                self._on_end.append(callback)
                return
        callback()

    # -- the reader's side ---------------------------------------------------------------

    def wait(self, past: int) -> memoryview:
        """The bytes received after the first ``past``, waiting until there are some; empty
        once the GET has ended without more (the reader then takes the GET's result, or
        its error, the ordinary way)."""
        with self._cond:
            while self._filled <= past and not self._ended:
                self._cond.wait()
            return self._since(past)

    def now(self, past: int) -> memoryview:
        """The bytes received after the first ``past`` so far, without waiting; may be
        empty."""
        with self._cond:
            return self._since(past)

    def _since(self, past: int) -> memoryview:
        if self._view is None or self._filled <= past:
            return memoryview(b"")
        return self._view[past : self._filled]
