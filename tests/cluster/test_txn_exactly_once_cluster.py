"""The exactly-once loop in the three-broker cluster: a consume-transform-produce copier
(confluent-kafka, ``send_offsets_to_transaction``) copies an RF=3 topic to an RF=3 topic while,
``KILL_ROUNDS`` times, the transaction coordinator's broker, a partition leader or a random
broker is killed with ``kill -9`` and restarted. The input grows by a chunk each round, so
every kill lands while the copier has work. The output read with read_committed holds each
input record exactly once (every record polled is kept; lost and duplicated ones are reported).

Each round waits for the restarted broker to be back in the ISR of every partition the loop
uses before the next kill, so at most one broker is down at a time, as min.insync.replicas=2
allows."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import pytest
from kazoo.client import KazooClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import SESSION_TIMEOUT_MS, bootstrap, create_topic, start_cluster, state
from tests.helpers.eos_copier import GROUP, TRANSACTIONAL_ID
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
from tests.helpers.txn_clients import read_all
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.server.group.schema import OFFSETS_TOPIC, partition_for
from tierlog.server.txn.schema import TRANSACTION_STATE_TOPIC, coordinator_partition

KILL_ROUNDS = KILLS
"""Acceptance "exactly-once loop" of issue 14: 5 kills in ``make test``, 50 under soak."""

#: A round (a kill, the broker back in every ISR, more input) takes up to about a minute here.
pytestmark = pytest.mark.timeout(300 + 60 * KILL_ROUNDS)

PARTITIONS = 3
INTERNAL_PARTITIONS = 3
CHUNK = 1000
MIN_ISR = "2"
REPLICAS = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


def _partitions() -> list[tuple[str, int]]:
    """Every partition the loop writes: input, output, its transaction log partition and its
    group's offsets partition."""
    return [
        *(("source", p) for p in range(PARTITIONS)),
        *(("sink", p) for p in range(PARTITIONS)),
        (TRANSACTION_STATE_TOPIC, coordinator_partition(TRANSACTIONAL_ID, INTERNAL_PARTITIONS)),
        (OFFSETS_TOPIC, partition_for(GROUP, INTERNAL_PARTITIONS)),
    ]


def _leader(kazoo: KazooClient, topic: str, p: int) -> int | None:
    s = state(kazoo, topic, p)
    return s.leader if s is not None and s.leader != -1 else None


def _all_led_without(kazoo: KazooClient, victim: int) -> bool:
    return all(_leader(kazoo, t, p) not in (None, victim) for t, p in _partitions())


def _full_isr(kazoo: KazooClient) -> bool:
    for t, p in _partitions():
        s = state(kazoo, t, p)
        if s is None or sorted(s.isr) != [1, 2, 3]:
            return False
    return True


def _isr_report(kazoo: KazooClient) -> str:
    return ", ".join(f"{t}-{p}: {state(kazoo, t, p)}" for t, p in _partitions())


def _describe(brokers: dict[int, BrokerProcess]) -> list[str]:
    """DescribeTransactions of the copier's id at every live broker (the coordinator answers)."""
    found = []
    for i, b in brokers.items():
        if not b.running:
            continue
        try:
            with WireConnection.to_bootstrap(b.bootstrap) as conn:
                r = conn.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[TRANSACTIONAL_ID])
            found.append(f"{i}: {r.transaction_states[0]}")
        except Exception as e:  # a diagnostic: an answer the client cannot decode is shown
            found.append(f"{i}: {e!r}")
    return found


def _victim(kazoo: KazooClient, round_: int, rng: random.Random) -> tuple[int, str]:
    if round_ % 3 == 0:
        p = coordinator_partition(TRANSACTIONAL_ID, INTERNAL_PARTITIONS)
        return wait_until(
            lambda: _leader(kazoo, TRANSACTION_STATE_TOPIC, p), 20, what="a coordinator"
        ), "coordinator"
    if round_ % 3 == 1:
        topic = rng.choice(["source", "sink"])
        p = rng.randrange(PARTITIONS)
        return wait_until(
            lambda: _leader(kazoo, topic, p), 20, what="a leader"
        ), f"leader of {topic}-{p}"
    return rng.choice([1, 2, 3]), "random"


def test_exactly_once_copy_survives_kill_9_of_brokers_in_the_cluster(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = start_cluster(
        broker_factory,
        zk_connect,
        kazoo_client,
        extra={
            "offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
            "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS),
            "transaction.state.log.min.isr": MIN_ISR,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
        },
    )
    every = bootstrap(brokers)
    for topic in ("source", "sink"):
        create_topic(brokers, kazoo_client, topic, REPLICAS, {"min.insync.replicas": MIN_ISR})
    total = CHUNK * (KILL_ROUNDS + 1)
    produce_input(every, "source", 0, CHUNK, PARTITIONS)
    rng = random.Random(14)
    copier = Copier(every, "source", "sink", total, PARTITIONS)
    victims: list[str] = []
    try:
        for round_ in range(KILL_ROUNDS):
            mark = wait_until(
                partial(sink_end, every, "sink", PARTITIONS), 60, 0.2, f"round {round_}: sink's end"
            )
            try:
                wait_until(partial(copied_past, every, copier, mark), PROGRESS_S, 0.2, "progress")
            except AssertionError as e:
                raise AssertionError(
                    f"round {round_}: no progress; the transaction: {_describe(brokers)}"
                ) from e
            victim, why = _victim(kazoo_client, round_, rng)
            victims.append(f"{victim} ({why})")
            assert not copier.finished, f"the copier finished before kill {round_ + 1}"
            brokers[victim].kill()
            wait_until(
                partial(_all_led_without, kazoo_client, victim),
                30,
                what=f"round {round_}: leaders other than broker {victim}",
            )
            brokers[victim].start(timeout_s=SESSION_TIMEOUT_MS / 1000 + 30)
            try:
                wait_until(partial(_full_isr, kazoo_client), 60, what="every ISR full")
            except AssertionError as e:
                raise AssertionError(
                    f"round {round_}: broker {victim} not back: {_isr_report(kazoo_client)}"
                ) from e
            produce_input(every, "source", CHUNK * (round_ + 1), CHUNK, PARTITIONS)
        copier.wait_finished(timeout_s=300)
    finally:
        copier.close()
    out = read_all(every, "sink", "read_committed", total, partitions=PARTITIONS)
    report = exactly_once_report(out, total)
    assert not report, f"{report}; killed {victims}, copier restarts {copier.restarts}"
    assert len(out) == total
