"""The exactly-once loop under crashes: a consume-transform-produce copier (confluent-kafka,
``send_offsets_to_transaction``) copies a topic while the single broker is killed with
``kill -9`` and restarted five times (fifty under ``TIERLOG_SOAK=1``, ``make soak``). The
output read with read_committed holds each input record exactly once, and the group's
committed offsets cover the whole input."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from tests.helpers.broker import BrokerProcess
from tests.helpers.eos_run import Copier, exactly_once_report, produce_input
from tests.helpers.txn_clients import create_topic, read_all

KILLS = 50 if os.environ.get("TIERLOG_SOAK", "") not in ("", "0") else 5
TOTAL = 1000 * KILLS
PARTITIONS = 2


def test_exactly_once_copy_survives_kill_9_of_the_broker(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    create_topic(broker, "source", PARTITIONS)
    create_topic(broker, "sink", PARTITIONS)
    produce_input(broker.bootstrap, "source", 0, TOTAL, PARTITIONS)
    copier = Copier(broker.bootstrap, "source", "sink", TOTAL, PARTITIONS)
    kills_mid_copy = 0
    try:
        for _ in range(KILLS):
            time.sleep(1.0)  # let the copier make progress between crashes
            kills_mid_copy += not copier.finished
            broker.restart(kill=True)
            copier.revive()
        copier.wait_finished(timeout_s=240)
    finally:
        copier.close()
    assert kills_mid_copy == KILLS, f"the copier finished before kill {kills_mid_copy + 1}"
    out = read_all(broker.bootstrap, "sink", "read_committed", TOTAL, partitions=PARTITIONS)
    assert not exactly_once_report(out, TOTAL), exactly_once_report(out, TOTAL)
    assert len(out) == TOTAL
