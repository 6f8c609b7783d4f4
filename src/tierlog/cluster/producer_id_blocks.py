"""Producer ids unique across the cluster: blocks claimed from ``/latest_producer_id_block``,
as Kafka's ZooKeeper-mode ``ProducerIdManager`` does.

The znode holds the last block handed out, ``{"version":1,"broker":B,"block_start":"S",
"block_end":"E"}`` (decimal strings, ``block_end`` inclusive). A broker claims the next block
with a ``setData`` conditional on the version it read (a create when the znode is missing),
and retries when another broker claimed one in between, so no two brokers ever hold
overlapping blocks. An id from a claimed block is never handed out twice: a broker that
restarts claims a new block and abandons the rest of its old one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
BLOCK_SIZE = 1000


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    start: int
    end: int
    """Inclusive."""

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(self.start),
                "block_end": str(self.end),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        obj = json.loads(data)
        return cls(int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"]))


def claim_block(zk: KazooClient, broker_id: int, size: int = BLOCK_SIZE) -> ProducerIdBlock:
    """Claim the next block for ``broker_id`` (blocking; retried on contention)."""
    while True:
        try:
            data, stat = zk.get(LATEST_PRODUCER_ID_BLOCK)
        except NoNodeError:
            block = ProducerIdBlock(broker_id, 0, size - 1)
            try:
                zk.create(LATEST_PRODUCER_ID_BLOCK, block.encode())
                return block
            except NodeExistsError:
                continue
        last = ProducerIdBlock.decode(data)
        block = ProducerIdBlock(broker_id, last.end + 1, last.end + size)
        try:
            zk.set(LATEST_PRODUCER_ID_BLOCK, block.encode(), stat.version)
            return block
        except BadVersionError:
            continue
