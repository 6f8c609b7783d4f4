"""What the ``tierlog transactions`` and ``log-dirs`` tests share: the CLI run as an operator
runs it, its tables read back, and the broker's own answers over the wire (the producer id
a coordinator gave, a partition's last stable offset) to check the CLI against."""

from __future__ import annotations

import subprocess
import time

from tests.helpers.cluster import run_cli
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey

MINUTE_MS = 60_000


def txn_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``tierlog transactions --bootstrap-server B ...``."""
    return run_cli("transactions", "--bootstrap-server", bootstrap, *args)


def rows(stdout: str) -> list[dict[str, str]]:
    """A ``prettyPrintTable`` (cells padded and each followed by a tab) keyed by its header."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    split = [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]
    return [dict(zip(split[0], row, strict=True)) for row in split[1:]]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def producer_of(bootstrap: str, transactional_id: str) -> tuple[int, int]:
    """(producer id, epoch) the coordinator holds for ``transactional_id``."""
    with WireConnection.to_bootstrap(bootstrap) as conn:
        found = conn.call(ApiKey.FIND_COORDINATOR, 3, key=transactional_id, key_type=1)
    with WireConnection(str(found.host), int(found.port)) as conn:
        r = conn.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[transactional_id])
    t = r.transaction_states[0]
    assert int(t.error_code) == 0
    return int(t.producer_id), int(t.producer_epoch)


def stable_and_high(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """The partition's last stable offset and high watermark (ListOffsets latest at
    read_committed and read_uncommitted)."""
    out = []
    with WireConnection.to_bootstrap(bootstrap) as conn:
        for isolation in (1, 0):
            r = conn.call(
                ApiKey.LIST_OFFSETS,
                7,
                replica_id=-1,
                isolation_level=isolation,
                topics=[
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "current_leader_epoch": -1,
                                "timestamp": -1,
                            }
                        ],
                    }
                ],
            )
            p = r.topics[0].partitions[0]
            assert int(p.error_code) == 0
            out.append(int(p.offset))
    return out[0], out[1]
