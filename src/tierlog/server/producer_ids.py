"""Producer-id allocation that never hands out an id twice, across restarts.

Ids are reserved in blocks: the end of the current block is persisted before any id from
it is given out, so after a crash the broker resumes at the next block (skipping at most one
block's worth of ids), like Kafka's ``ProducerIdManager``.
"""

from __future__ import annotations

from pathlib import Path

from tierlog.server.state_files import read_json, write_json

BLOCK_SIZE = 1000
STATE_FILE = "__tierlog_producer_ids.json"


class ProducerIdAllocator:
    def __init__(self, state_dir: Path) -> None:
        self._path = state_dir / STATE_FILE
        state = read_json(self._path) or {}
        self._next = int(state.get("block_end", 0))
        self._block_end = self._next

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_json(self._path, {"block_end": self._block_end})
        pid = self._next
        self._next += 1
        return pid
