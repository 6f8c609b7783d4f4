"""Where long-polling Fetch requests wait for data (Kafka's "fetch purgatory").

A waiting fetch registers one future under every partition it reads; an append to any of
them completes the future, and the fetch re-reads. There is no polling: a fetch with
``max_wait_ms`` and no new data costs one timer and one future.

Keys are ``(topic, partition)``. A waiter may also register under ``topic_key(topic)`` to
hear every partition of the topic: a fetch session of 1,000 partitions waits under its few
topics instead of 1,000 keys. ``changes(key)`` counts the notifications of a partition (and,
under its topic key, of all partitions of a topic), so a fetch session can tell which of
its partitions moved without reading them (one int per partition and topic ever notified).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


def topic_key(topic: str) -> tuple[str, None]:
    """The key under which a waiter hears every partition of ``topic``."""
    return (topic, None)


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}
        #: Fetches that have waited here (a metric: an answer given at once never does).
        self.waits = 0
        self._changes: dict[Hashable, int] = {}

    @property
    def waiting(self) -> int:
        return len({id(f) for fs in self._waiters.values() for f in fs})

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or the timeout passes; True if notified."""
        if timeout_s <= 0:
            return False
        self.waits += 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for k in keys:
            self._waiters.setdefault(k, set()).add(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for k in keys:
                ws = self._waiters.get(k)
                if ws is not None:
                    ws.discard(fut)
                    if not ws:
                        del self._waiters[k]
            if not fut.done():
                fut.cancel()

    def changes(self, key: Hashable) -> int:
        """How many times ``key`` has been notified."""
        return self._changes.get(key, 0)

    def notify(self, key: Hashable) -> None:
        self._changes[key] = self._changes.get(key, 0) + 1
        if isinstance(key, tuple) and len(key) == 2 and key[1] is not None:
            tkey = topic_key(key[0])
            self._changes[tkey] = self._changes.get(tkey, 0) + 1
            self._wake(tkey)
        self._wake(key)

    def _wake(self, key: Hashable) -> None:
        ws = self._waiters.pop(key, None)
        if not ws:
            return
        for fut in ws:
            if not fut.done():
                fut.set_result(None)

    def notify_all(self) -> None:
        """Used at shutdown so waiting fetches answer at once."""
        for key in list(self._waiters):
            self._wake(key)
