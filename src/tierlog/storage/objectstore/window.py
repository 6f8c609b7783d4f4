"""The read-ahead control law: how many chunks one read stream keeps ahead of its reader.

Pure bookkeeping, no threads and no clock of its own (every event carries its time), so the
law can be driven step by step with a fake clock. docs/read-ahead.md states it in full.

Inputs, per stream:

* ``got(seconds)``: a read-ahead GET took that long (latency plus transfer), ``L``;
* ``advanced(now, waited)``: the reader moved on to its next chunk at ``now``, after waiting
  ``waited`` seconds for it (0 when it was already loaded). The time between two advances
  minus the wait is what the consumer itself took per chunk, ``T_c``;
* ``waiting()``: the reader needs its next chunk and it has not landed.

Output: ``ahead``, the chunks loaded or in flight past the reader's chunk (1..``cap``). The
window is those plus the chunk being read: a reader that stops leaves less than one window
fetched and unread.

The law is decided once per epoch (``ahead`` advances, at least two), from the epoch's
throughput ``X`` (bytes the reader consumed per second) and whether it waited:

* the reader waited (the store is behind): grow ``ahead`` up to ``cap``, by
  ``SLOW_START_GROWTH`` until the stream first plateaus or shrinks (slow start), by 2
  after that; but if the last growth raised ``X`` by less than ``PLATEAU_GAIN``, the
  store, not the window, is the limit: go back to the smaller window and hold it for
  ``HOLD_EPOCHS`` epochs before probing a doubling again. A growth is judged on the
  epoch after its ramp, not on the ramp: the chunks it added are requested as it is
  decided and land one GET later, and until the reader reaches them it drains the chunks
  the old window had requested, so the ramp lasts that old window's advances and its
  ``X`` is the old window's;
* the reader never waited (the consumer is the slower one): shrink towards the demand
  ``D = ceil(L / T_c) + 1``, the chunks a consumer needing ``T_c`` per chunk drains
  during one GET, plus one in reserve; at most halving per epoch.

A reader's first epoch is decided at its first wait instead of at its end: it has no
growth to judge, so its end could only say what the wait already says, one GET later. The
growth it takes is judged against what Little's law gives the first window from its own
GETs' times, for want of an epoch measured at that window.
"""

from __future__ import annotations

import math

__all__ = ["HOLD_EPOCHS", "INITIAL_AHEAD", "PLATEAU_GAIN", "SLOW_START_GROWTH", "WindowLaw"]

#: Read-ahead chunks a new stream starts with (or ``cap`` if smaller). A new reader's
#: first epochs are where a window law loses against the store: with 2 chunks ahead (one
#: 4 MiB GET of latency ``L`` each) it cannot take more than a few chunks per ``L``, and a
#: traced 512 MiB read took 0.84 s for its first 64 MiB segment, 1.63 s for the other seven
#: (docs/benchmarks.md, twenty-fifth session). At 8 the first epoch already
#: keeps the store near its pace; a reader that stops after one Fetch leaves at most these
#: chunks fetched for nothing (the budget bounds their sum over all streams), as a TCP
#: connection's initial window of 10 segments spends that much on a peer that stops at once.
INITIAL_AHEAD = 8
#: How much the window grows per epoch in slow start. Each epoch lasts a window's worth of
#: advances, paced by the store while the reader waits, so it takes about one GET latency;
#: from 8 to a 32-chunk cap that is one epoch at fourfold growth, two at twofold. Linux's
#: file read-ahead ramps the same way (x4 while small, then x2). After the first plateau or
#: shrink the store's knee is known to be near and growth doubles, so a probe overshoots it
#: by one doubling, not four times.
SLOW_START_GROWTH = 4
#: A growth must raise the epoch's throughput by this fraction to count as growth.
PLATEAU_GAIN = 0.1
#: Epochs a plateaued window is held before it probes a doubling again.
HOLD_EPOCHS = 8
#: Weight of the newest sample in the moving averages of ``L`` and ``T_c``.
_ALPHA = 0.3
#: A wait shorter than this is scheduling noise, not a reader waiting for the store.
_WAIT_NOISE_S = 0.0005


class WindowLaw:
    """One stream's adaptive read-ahead; not thread-safe (the stream holds its lock)."""

    __slots__ = (
        "_at_growth",
        "_bytes",
        "_decided",
        "_epoch_advances",
        "_epoch_start",
        "_first_get_s",
        "_first_gets",
        "_hold",
        "_initial",
        "_last_advance",
        "_previous",
        "_ramping",
        "_slow_start",
        "_waited",
        "ahead",
        "cap",
        "chunk",
        "consume_s",
        "get_s",
    )

    def __init__(self, chunk: int, cap: int, *, initial: int = INITIAL_AHEAD) -> None:
        self.chunk = chunk
        self.cap = max(0, cap)
        self.ahead = min(self.cap, max(1, initial))
        self._initial = self.ahead
        self._first_gets = 0  # the first window's GETs measured so far, and their seconds
        self._first_get_s = 0.0
        self.get_s: float | None = None  # L: moving average of a read-ahead GET
        self.consume_s: float | None = None  # T_c: the consumer's own time per chunk
        self._last_advance: float | None = None
        self._epoch_start: float | None = None
        self._epoch_advances = 0
        self._bytes = 0
        self._waited = False
        self._previous: int | None = None  # ahead before the last growth
        self._at_growth: float | None = None  # X of the epoch that decided that growth
        self._hold = 0
        self._ramping = False  # the epoch in progress is a growth's ramp
        self._slow_start = True
        self._decided = False  # an epoch of this reader was decided (the first one ended)

    def resumed(self) -> WindowLaw:
        """A law for the same reader's next stream (its next segment): it continues this
        one, its window, its estimates and its epoch, instead of starting from scratch. An
        epoch lasts as many advances as the window has chunks, as long as a whole segment
        once the window is a segment's worth of chunks (64 MiB segments, 16 chunks of
        4 MiB): an epoch ended with each stream would never be decided there, and the
        window could not grow past one segment."""
        law = WindowLaw(self.chunk, self.cap, initial=self.ahead)
        for name in self.__slots__:
            setattr(law, name, getattr(self, name))
        return law

    @property
    def window_bytes(self) -> int:
        """Bytes of read-ahead this stream may hold now (not counting the reader's chunk)."""
        return self.ahead * self.chunk

    def demand(self) -> int | None:
        """``D``: read-ahead chunks that hide one GET from this consumer; None before both
        ``L`` and ``T_c`` were measured."""
        if self.get_s is None or self.consume_s is None:
            return None
        return math.ceil(self.get_s / max(self.consume_s, 1e-6)) + 1

    def got(self, seconds: float) -> None:
        """A read-ahead GET took ``seconds``. Unlike the rest of the law this may be called
        without the stream's lock (the plugin's warming of the partition's next segments):
        it only moves one moving average, where a sample lost to a race costs nothing (the
        first window's sum, kept for ``_baseline``, is an estimate in the same way)."""
        self.get_s = _average(self.get_s, seconds)
        if self._first_gets < self._initial:
            self._first_gets += 1
            self._first_get_s += seconds

    def advanced(self, now: float, waited: float, nbytes: int | None = None) -> None:
        """The reader entered its next chunk at ``now`` after waiting ``waited`` seconds;
        ``nbytes`` is what it consumed of the previous chunk (a whole chunk by default)."""
        if self.cap == 0:
            return
        if self._last_advance is not None:
            busy = max(0.0, now - self._last_advance - waited)
            self.consume_s = _average(self.consume_s, busy)
            self._bytes += self.chunk if nbytes is None else nbytes
            self._epoch_advances += 1
        if self._epoch_start is None:
            self._epoch_start = now
        if waited > _WAIT_NOISE_S and self._last_advance is not None:
            self._waited = True
        self._last_advance = now
        # the epoch after a growth lasts until the reader reaches the chunks it requested
        length = self._previous if self._ramping and self._previous else self.ahead
        if self._epoch_advances >= max(2, length):
            self._decide(now)

    def waiting(self) -> None:
        """The reader needs its next chunk and it has not landed. In a reader's first epoch
        that is already the epoch's decision: the window grows now, not an epoch of
        advances later. The end of that epoch would have had no earlier growth to judge and
        would have grown the same way, but only after the reader had waited for the chunks
        the small window left it: in traced 512 MiB cold reads through the bench's +50 ms
        proxy, 0.13 s of the first 0.26 s went by with 8 GETs in flight before the window
        reached its cap of 32. The growth is judged like any other, against ``_baseline``.
        A reader that stops inside its first chunk never waits, so what it leaves fetched
        is still the first window."""
        if self.cap == 0 or self._decided:
            return
        self._decided = True
        if self.ahead >= self.cap:
            return
        self._previous = self.ahead
        self._at_growth = None
        self.ahead = min(self.cap, SLOW_START_GROWTH * self.ahead)
        self._ramping = True
        self._epoch_start = None
        self._epoch_advances = 0
        self._bytes = 0
        self._waited = False

    def _decide(self, now: float) -> None:
        assert self._epoch_start is not None
        self._decided = True
        elapsed = max(now - self._epoch_start, 1e-9)
        throughput = self._bytes / elapsed
        if self._waited:
            self._when_behind(throughput)
        else:
            self._when_ahead()
        self._epoch_start = now
        self._epoch_advances = 0
        self._bytes = 0
        self._waited = False

    def _when_behind(self, throughput: float) -> None:
        if self._ramping:
            # the reader drained the old window's chunks: judge the growth on the next
            self._ramping = False
            return
        if self._hold > 0:
            self._hold -= 1
            return
        baseline = self._baseline()
        if baseline is not None and throughput < baseline * (1 + PLATEAU_GAIN):
            # the last growth bought nothing: the store is the limit here
            assert self._previous is not None
            self.ahead = self._previous
            self._previous = self._at_growth = None
            self._hold = HOLD_EPOCHS
            self._slow_start = False
            return
        if self.ahead >= self.cap:
            self._previous = self._at_growth = None
            return
        self._previous = self.ahead
        self._at_growth = throughput
        growth = SLOW_START_GROWTH if self._slow_start else 2
        self.ahead = min(self.cap, growth * self.ahead)
        self._ramping = True

    def _baseline(self) -> float | None:
        """``X`` before the last growth still to be judged, None when there is none. A
        growth taken at the first wait (``waiting``) had no epoch before it to measure:
        its baseline is what Little's law gives the smaller window from the time its own
        GETs took, ``previous * chunk / L``, the most that window could have drained. That
        is an upper bound, so such a growth is kept only if it beats what the smaller window
        could have done at best."""
        if self._previous is None or self._at_growth is not None:
            return self._at_growth
        if self._first_gets == 0:
            return None
        return self._previous * self.chunk * self._first_gets / max(self._first_get_s, 1e-9)

    def _when_ahead(self) -> None:
        self._previous = self._at_growth = None
        self._hold = 0
        self._ramping = False
        wanted = self.demand()
        if wanted is None or wanted >= self.ahead:
            return
        self.ahead = max(1, wanted, self.ahead // 2)
        self._slow_start = False


def _average(old: float | None, sample: float) -> float:
    return sample if old is None else old + _ALPHA * (sample - old)
