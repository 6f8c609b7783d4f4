"""Where long-polling Fetch requests wait for data (Kafka's "fetch purgatory").

A waiting fetch registers one future under every partition it reads; an append to any of
them completes the future, and the fetch re-reads. There is no polling: a fetch with
``max_wait_ms`` and no new data costs one timer and one future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}

    @property
    def waiting(self) -> int:
        return len({id(f) for fs in self._waiters.values() for f in fs})

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or the timeout passes; True if notified."""
        if timeout_s <= 0:
            return False
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

    def notify(self, key: Hashable) -> None:
        ws = self._waiters.pop(key, None)
        if not ws:
            return
        for fut in ws:
            if not fut.done():
                fut.set_result(None)

    def notify_all(self) -> None:
        """Used at shutdown so waiting fetches answer at once."""
        for key in list(self._waiters):
            self.notify(key)
