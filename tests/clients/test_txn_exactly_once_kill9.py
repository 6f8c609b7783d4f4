"""The exactly-once loop under crashes: a consume-transform-produce copier (confluent-kafka,
``send_offsets_to_transaction``) copies a topic while the single broker is killed with
``kill -9`` and restarted five times (fifty under ``TIERLOG_SOAK=1``, ``make soak``). The
output read with read_committed holds each input record exactly once, and the group's
committed offsets cover the whole input."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.eos_run import (
    KILLS,
    PROGRESS_S,
    Copier,
    copied_past,
    exactly_once_report,
    produce_input,
    sink_end,
)
from tests.helpers.poll import wait_until
from tests.helpers.txn_clients import create_topic, read_all

#: A round (a kill, a restart, more input) takes up to about 20 s here.
pytestmark = pytest.mark.timeout(300 + 30 * KILLS)
CHUNK = 1000
TOTAL = CHUNK * (KILLS + 1)
PARTITIONS = 2


def test_exactly_once_copy_survives_kill_9_of_the_broker(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    create_topic(broker, "source", PARTITIONS)
    create_topic(broker, "sink", PARTITIONS)
    produce_input(broker.bootstrap, "source", 0, CHUNK, PARTITIONS)
    copier = Copier(broker.bootstrap, "source", "sink", TOTAL, PARTITIONS)
    try:
        for round_ in range(KILLS):
            # a kill lands once the copier has made progress, and more input follows it, so
            # every crash comes in the middle of the copy however fast the copier runs
            mark = wait_until(
                partial(sink_end, broker.bootstrap, "sink", PARTITIONS), 60, 0.2, "sink's end"
            )
            wait_until(
                partial(copied_past, broker.bootstrap, copier, mark), PROGRESS_S, 0.2, "progress"
            )
            assert not copier.finished, f"the copier finished before kill {round_ + 1}"
            broker.restart(kill=True)
            copier.revive()
            produce_input(broker.bootstrap, "source", CHUNK * (round_ + 1), CHUNK, PARTITIONS)
        copier.wait_finished(timeout_s=240)
    finally:
        copier.close()
    out = read_all(broker.bootstrap, "sink", "read_committed", TOTAL, partitions=PARTITIONS)
    assert not exactly_once_report(out, TOTAL), exactly_once_report(out, TOTAL)
    assert len(out) == TOTAL
