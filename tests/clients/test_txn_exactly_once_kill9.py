"""The exactly-once loop under crashes: a consume-transform-produce copier (confluent-kafka,
``send_offsets_to_transaction``) copies a topic while the single broker is killed with
``kill -9`` and restarted five times. The output read with read_committed holds each input
record exactly once, and the group's committed offsets cover the whole input."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable

import confluent_kafka as ck

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.txn_clients import create_topic, read_all

TOTAL = 5000
PARTITIONS = 2
KILLS = 5


def _copier(bootstrap: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.eos_copier",
            bootstrap,
            "source",
            "sink",
            str(TOTAL),
            str(PARTITIONS),
        ],
        stderr=subprocess.PIPE,
    )


def test_exactly_once_copy_survives_kill_9_of_the_broker(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    create_topic(broker, "source", PARTITIONS)
    create_topic(broker, "sink", PARTITIONS)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(TOTAL):
        p.produce("source", b"%d" % i, partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(30) == 0
    copier = _copier(broker.bootstrap)
    restarts = 0
    kills_mid_copy = 0
    try:
        for _ in range(KILLS):
            time.sleep(1.0)  # let the copier make progress between crashes
            kills_mid_copy += copier.poll() is None
            broker.restart(kill=True)
            if copier.poll() is not None and copier.returncode != 0:
                copier = _copier(broker.bootstrap)
                restarts += 1

        def finished() -> bool:
            nonlocal copier, restarts
            code = copier.poll()
            if code is None:
                return False
            if code == 0:
                return True
            copier = _copier(broker.bootstrap)
            restarts += 1
            return False

        wait_until(finished, timeout_s=240, interval_s=0.2, what="the copier to finish")
    finally:
        if copier.poll() is None:
            copier.kill()
            copier.wait()
    assert kills_mid_copy == KILLS, f"the copier finished before kill {kills_mid_copy + 1}"
    out = read_all(broker.bootstrap, "sink", "read_committed", TOTAL, partitions=PARTITIONS)
    counts = Counter(out)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    missing = {b"out-%d" % i for i in range(TOTAL)} - set(counts)
    assert not duplicates, f"{len(duplicates)} duplicated, e.g. {list(duplicates)[:5]}"
    assert not missing, f"{len(missing)} missing, e.g. {sorted(missing)[:5]}"
    assert len(out) == TOTAL
