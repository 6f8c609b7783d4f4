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
from tests.helpers.txn_clients import create_topic, read_all, transactional_producer


def test_commit_and_abort_with_a_read_committed_consumer(broker: BrokerProcess) -> None:
    create_topic(broker, "orders", 2)
    p = transactional_producer(broker.bootstrap, "orders-tx")
    p.begin_transaction()
    for i in range(10):
        p.produce("orders", b"aborted-%d" % i, partition=i % 2)
    assert p.flush(30) == 0  # in the log, not purged from the queue by the abort
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("orders", b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    committed = read_all(broker.bootstrap, "orders", "read_committed", 10, partitions=2)
    assert sorted(committed) == sorted(b"committed-%d" % i for i in range(10))
    everything = read_all(broker.bootstrap, "orders", "read_uncommitted", 20, partitions=2)
    assert len(everything) == 20


def test_a_second_producer_fences_the_zombie(broker: BrokerProcess) -> None:
    create_topic(broker, "fenced")
    zombie = transactional_producer(broker.bootstrap, "fenced-tx")
    zombie.begin_transaction()
    zombie.produce("fenced", b"zombie-1")
    zombie.flush(10)
    successor = transactional_producer(broker.bootstrap, "fenced-tx")
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
    assert read_all(broker.bootstrap, "fenced", "read_committed", 1) == [b"successor"]


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
    create_topic(broker, "hung")
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
    p = transactional_producer(broker.bootstrap, "after-hung")
    p.begin_transaction()
    p.produce("hung", b"later")
    p.commit_transaction(30)
    assert read_all(broker.bootstrap, "hung", "read_committed", 1) == [b"later"]


def _copy_exactly_once(
    bootstrap: str, source: str, sink: str, total: int, *, abort_every: int = 0
) -> int:
    """Consume-transform-produce with send_offsets_to_transaction until ``total`` input records
    were committed; every ``abort_every``-th transaction is aborted and its input re-read from
    the group's committed offsets. Returns the number of transactions committed."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "copier",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        }
    )
    producer = transactional_producer(bootstrap, "copier-tx")
    consumer.subscribe([source])
    done = commits = attempts = 0
    try:

        def copied_all() -> bool:
            nonlocal done, commits, attempts
            batch = consumer.consume(num_messages=25, timeout=0.5)
            if not batch:
                return done >= total
            producer.begin_transaction()
            for m in batch:
                assert m.error() is None, m.error()
                producer.produce(sink, b"out-" + bytes(m.value() or b""))
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            attempts += 1
            if abort_every and attempts % abort_every == 0:
                assert producer.flush(30) == 0
                producer.abort_transaction(30)
                for tp in consumer.committed(consumer.assignment(), 30):
                    consumer.seek(
                        tp if tp.offset >= 0 else ck.TopicPartition(tp.topic, tp.partition, 0)
                    )
                return False
            producer.commit_transaction(30)
            commits += 1
            done += len(batch)
            return done >= total

        wait_until(copied_all, timeout_s=120, interval_s=0, what=f"{total} records copied")
        return commits
    finally:
        consumer.close()


@pytest.mark.parametrize("abort_every", [0, 3])
def test_consume_transform_produce_with_send_offsets(
    broker: BrokerProcess, abort_every: int
) -> None:
    create_topic(broker, "source", 2)
    create_topic(broker, "sink", 2)
    total = 300
    p = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(total):
        p.produce("source", b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    assert _copy_exactly_once(broker.bootstrap, "source", "sink", total, abort_every=abort_every)
    out = read_all(broker.bootstrap, "sink", "read_committed", total, partitions=2)
    assert sorted(out) == sorted(b"out-%d" % i for i in range(total))
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "copier"})
    try:
        committed = c.committed([ck.TopicPartition("source", p) for p in (0, 1)], 30)
        assert sum(tp.offset for tp in committed) == total
    finally:
        c.close()
