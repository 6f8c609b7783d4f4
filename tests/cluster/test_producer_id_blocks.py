"""Producer-id blocks claimed from ``/latest_producer_id_block`` never overlap, whichever
broker claims them, and the znode holds Kafka's JSON."""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor

from kazoo.client import KazooClient

from tierlog.cluster.producer_id_blocks import LATEST_PRODUCER_ID_BLOCK, claim_block


def test_blocks_never_overlap(kazoo_client: KazooClient) -> None:
    first = claim_block(kazoo_client, 1)
    assert (first.start, first.end) == (0, 999)
    with ThreadPoolExecutor(4) as pool:
        blocks = list(pool.map(lambda b: claim_block(kazoo_client, b), [1, 2, 3, 2, 3, 1, 2, 3]))
    ranges = sorted((b.start, b.end) for b in [first, *blocks])
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    assert ranges[-1][1] == 9 * 1000 - 1
    stored = json.loads(kazoo_client.get(LATEST_PRODUCER_ID_BLOCK)[0])
    assert stored["version"] == 1 and stored["block_end"] == str(ranges[-1][1])
