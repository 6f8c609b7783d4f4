"""confluent-kafka's transactional producer against a real ``tierlog serve``: commit and abort
seen through a read_committed consumer, zombie fencing, and a hung transaction (the producer
SIGKILLed in the middle) aborted after its transaction.timeout.ms."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

import confluent_kafka as ck
import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection


def _producer(bootstrap: str, tid: str, **extra: object) -> ck.Producer:
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "linger.ms": 5,
            **extra,
        }
    )
    p.init_transactions(30)
    return p


def _read(
    bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 1
) -> list[bytes]:
    """Values of every partition of ``topic`` from the start, until ``expect`` arrived and the
    consumer reached the end (the LSO for read_committed)."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        got: list[bytes] = []
        eof: set[int] = set()

        def done() -> bool:
            m = c.poll(0.2)
            if m is not None:
                error = m.error()
                if error is not None:
                    assert error.code() == ck.KafkaError._PARTITION_EOF, error
                    eof.add(int(m.partition() or 0))
                else:
                    got.append(bytes(m.value() or b""))
            return len(got) >= expect and len(eof) == partitions

        wait_until(done, timeout_s=30, interval_s=0, what=f"{expect} records of {topic}")
        return got
    finally:
        c.close()


def _create(broker: BrokerProcess, topic: str, partitions: int = 1) -> None:
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        assert conn.create_topic(topic, partitions)[0] == 0


def test_commit_and_abort_with_a_read_committed_consumer(broker: BrokerProcess) -> None:
    _create(broker, "orders", 2)
    p = _producer(broker.bootstrap, "orders-tx")
    p.begin_transaction()
    for i in range(10):
        p.produce("orders", b"aborted-%d" % i, partition=i % 2)
    assert p.flush(30) == 0  # in the log, not purged from the queue by the abort
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("orders", b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    committed = _read(broker.bootstrap, "orders", "read_committed", 10, partitions=2)
    assert sorted(committed) == sorted(b"committed-%d" % i for i in range(10))
    everything = _read(broker.bootstrap, "orders", "read_uncommitted", 20, partitions=2)
    assert len(everything) == 20


def test_a_second_producer_fences_the_zombie(broker: BrokerProcess) -> None:
    _create(broker, "fenced")
    zombie = _producer(broker.bootstrap, "fenced-tx")
    zombie.begin_transaction()
    zombie.produce("fenced", b"zombie-1")
    zombie.flush(10)
    successor = _producer(broker.bootstrap, "fenced-tx")
    zombie.produce("fenced", b"zombie-2")
    with pytest.raises(ck.KafkaException) as raised:
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (
        ck.KafkaError._FENCED,
        ck.KafkaError.PRODUCER_FENCED,
        ck.KafkaError.INVALID_PRODUCER_EPOCH,
    ), error
    successor.begin_transaction()
    successor.produce("fenced", b"successor")
    successor.commit_transaction(30)
    assert _read(broker.bootstrap, "fenced", "read_committed", 1) == [b"successor"]


_HANGING_PRODUCER = textwrap.dedent(
    """
    import sys, time
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "hung-tx",
                     "transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("hung", b"never")
    p.flush(30)
    print("sent", flush=True)
    time.sleep(600)
    """
)


def test_a_hung_transaction_is_aborted_after_its_timeout(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    _create(broker, "hung")
    proc = subprocess.Popen(
        [sys.executable, "-c", _HANGING_PRODUCER, broker.bootstrap],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"sent"
    finally:
        proc.kill()
        proc.wait()
    # the open transaction pins the LSO until the coordinator aborts it; then a committed
    # record after it becomes visible and the aborted one never does
    p = _producer(broker.bootstrap, "after-hung")
    p.begin_transaction()
    p.produce("hung", b"later")
    p.commit_transaction(30)
    assert _read(broker.bootstrap, "hung", "read_committed", 1) == [b"later"]
