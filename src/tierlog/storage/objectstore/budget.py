"""The broker-wide read-ahead budget: all bytes loaded ahead of readers, bounded together.

Every read-ahead chunk (in flight, or loaded and not yet reached by its reader) holds its
size from the budget, taken before its GET is issued and given back when its reader reaches
it, when the stream closes, or when the stream goes idle. A demand read (the chunk a reader
is in) takes nothing: it is the fixed overhead of one chunk per open stream.

Fairness: a stream may hold at most ``total / active streams`` (and never less than one
chunk while the budget has room), so a stream that has more than its share gets nothing
more until its reader has consumed down to it, and a new stream gets its share as the
others drain. A stream that took or consumed nothing for ``idle_s`` is idle: it does not
count among the active streams, and when an active stream finds the budget full, every idle
stream's holding is taken back (``Account.on_reclaim`` drops its loaded chunks).

Loads that are no stream's (``warm``) take from the budget through an account opened with
``open_in_flight``: it holds their GETs in flight and the chunks landed for a stream not
yet open (``warmed.WarmedChunks`` gives them back as streams take them, or after the idle
timeout), so it is never reclaimed here, and as it has no reader it never counts among the
active streams (a stream is not cut to half the budget because the plugin could warm).

``try_acquire`` never blocks: read-ahead that does not fit is simply not issued now (the
stream tries again as its reader advances). The budget is owned by the plugin and closed
with it; after ``close`` nothing is granted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tierlog.storage.objectstore import metrics

__all__ = ["Account", "ReadAheadBudget"]


class Account:
    """One stream's holding; created by ``ReadAheadBudget.open``."""

    __slots__ = ("_budget", "held", "last_used", "on_reclaim", "reclaimed", "stream")

    def __init__(
        self,
        budget: ReadAheadBudget,
        on_reclaim: Callable[[], None],
        now: float,
        *,
        stream: bool = True,
    ):
        self._budget = budget
        self.stream = stream
        self.held = 0
        self.last_used = now
        self.on_reclaim = on_reclaim
        self.reclaimed = False

    def try_acquire(self, nbytes: int) -> bool:
        return self._budget._acquire(self, nbytes)

    def release(self, nbytes: int) -> None:
        self._budget._release(self, nbytes)

    def touch(self) -> None:
        """The stream's reader made progress: it is active."""
        self._budget._touch(self)

    def close(self) -> None:
        self._budget._close_account(self)


class ReadAheadBudget:
    def __init__(
        self,
        total: int,
        *,
        chunk: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self._chunk = chunk
        self._idle_s = idle_s
        self._clock = clock
        self._lock = threading.Lock()
        self._accounts: set[Account] = set()
        self.used = 0
        self.peak = 0
        self._closed = False

    def open(self, on_reclaim: Callable[[], None]) -> Account:
        """A stream's account: it counts among the active streams until it goes idle."""
        return self._open(Account(self, on_reclaim, self._clock()))

    def open_in_flight(self) -> Account:
        """An account for loads that are no stream's (``warm``): their GETs in flight and
        their chunks until a stream takes them; no stream, so never counted for the fair
        share nor reclaimed."""
        return self._open(Account(self, lambda: None, self._clock(), stream=False))

    def _open(self, account: Account) -> Account:
        with self._lock:
            if not self._closed:
                self._accounts.add(account)
        return account

    def share(self) -> int:
        """What one active stream may hold now."""
        with self._lock:
            return self._share(self._clock())

    def close(self) -> None:
        """Grant nothing from now on; holdings already given are forgotten."""
        with self._lock:
            self._closed = True
            self._accounts.clear()
            self.used = 0
        metrics.READ_AHEAD_BYTES.set(0)

    # -- accounts -----------------------------------------------------------------------

    def _share(self, now: float) -> int:
        active = (
            sum(1 for a in self._accounts if a.stream and now - a.last_used <= self._idle_s) or 1
        )
        return max(self._chunk, self.total // active)

    def _acquire(self, account: Account, nbytes: int) -> bool:
        reclaimed: list[Account] = []
        with self._lock:
            if self._closed or account not in self._accounts:
                return False
            now = self._clock()
            account.reclaimed = False
            if self.used + nbytes > self.total:
                reclaimed = self._reclaim_idle(now, account)
            granted = self.used + nbytes <= self.total and account.held + nbytes <= self._share(now)
            if granted:
                # only what a stream takes keeps it active: a refused ask is what a stream
                # whose reader stopped still makes as its last GETs land and it refills
                account.last_used = now
                account.held += nbytes
                self.used += nbytes
                self.peak = max(self.peak, self.used)
                metrics.READ_AHEAD_BYTES.set(self.used)
        for idle in reclaimed:
            idle.on_reclaim()
        if not granted:
            metrics.READ_AHEAD_DENIED.inc()
        return granted

    def _reclaim_idle(self, now: float, asking: Account) -> list[Account]:
        idle = [
            a
            for a in self._accounts
            if a is not asking and a.stream and a.held > 0 and now - a.last_used > self._idle_s
        ]
        for a in idle:
            self.used -= a.held
            a.held = 0
            a.reclaimed = True
        return idle

    def _release(self, account: Account, nbytes: int) -> None:
        with self._lock:
            if account.reclaimed or account not in self._accounts:
                return  # already given back wholesale
            n = min(nbytes, account.held)
            account.held -= n
            self.used -= n
            metrics.READ_AHEAD_BYTES.set(self.used)

    def _touch(self, account: Account) -> None:
        with self._lock:
            account.last_used = self._clock()

    def _close_account(self, account: Account) -> None:
        with self._lock:
            if account in self._accounts:
                self._accounts.discard(account)
                if not account.reclaimed:
                    self.used -= account.held
                account.held = 0
                metrics.READ_AHEAD_BYTES.set(self.used)
