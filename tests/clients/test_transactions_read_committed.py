"""Transactional producers against read_committed consumers, every client (the partition
side of KIP-98: markers, LSO, aborted lists): aborted data is never delivered to a
read_committed consumer and a zombie's writes never become visible; read_uncommitted sees
every data record."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.clients.real_clients import create_topic
from tests.helpers.broker import BrokerProcess

PARTITIONS = 2


def _confluent(bootstrap: str, topic: str, isolation: str, count: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rc-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append(bytes(m.value() or b""))
        return sorted(got)
    finally:
        c.close()


def _kafka_python(bootstrap: str, topic: str, count: int) -> list[bytes]:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        isolation_level="read_committed",
    )
    try:
        tps = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=300).values():
                got.extend(bytes(r.value) for r in records)
        return sorted(got)
    finally:
        c.close()


def _aiokafka(bootstrap: str, topic: str, count: int) -> list[bytes]:
    async def run() -> list[bytes]:
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed"
        )
        await c.start()
        try:
            tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, 0)
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < count and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=300)
                got.extend(bytes(r.value or b"") for rs in batches.values() for r in rs)
            return sorted(got)
        finally:
            await c.stop()

    return asyncio.run(run())


def _transaction(p: Producer, topic: str, values: list[bytes], *, commit: bool) -> None:
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % PARTITIONS)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)


def test_read_committed_consumers_see_committed_transactions_only(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-read-committed"
    create_topic(bootstrap, topic, PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "rc-1", "linger.ms": 0})
    p.init_transactions(30)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for round_ in range(6):
        values = [b"r%d-%d" % (round_, i) for i in range(7)]
        commit = round_ % 2 == 1
        _transaction(p, topic, values, commit=commit)
        (committed if commit else aborted).extend(values)
    want = sorted(committed)
    assert _confluent(bootstrap, topic, "read_committed", len(want)) == want
    assert _kafka_python(bootstrap, topic, len(want)) == want
    assert _aiokafka(bootstrap, topic, len(want)) == want
    everything = sorted(committed + aborted)
    assert _confluent(bootstrap, topic, "read_uncommitted", len(everything)) == everything


def test_a_fenced_zombie_writes_nothing_visible(module_broker: BrokerProcess) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-zombie"
    create_topic(bootstrap, topic, PARTITIONS)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "transactional.id": "zombie"}
    zombie = Producer(config)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie-1", partition=0)
    zombie.flush(30)
    successor = Producer(config)
    successor.init_transactions(30)  # fences the zombie and aborts its transaction
    zombie.produce(topic, b"zombie-2", partition=1)
    failed = False
    try:
        zombie.commit_transaction(30)
    except KafkaException as e:
        failed = True
        assert e.args[0].fatal() or e.args[0].txn_requires_abort(), e
    assert failed, "the zombie's commit must fail"
    _transaction(successor, topic, [b"ok-1", b"ok-2"], commit=True)
    assert _confluent(bootstrap, topic, "read_committed", 2) == [b"ok-1", b"ok-2"]
    assert _kafka_python(bootstrap, topic, 2) == [b"ok-1", b"ok-2"]


class _Abort(Exception):
    pass


def test_aiokafka_transactions_commit_and_abort(module_broker: BrokerProcess) -> None:
    """aiokafka's transactional producer (InitProducerId v0, AddPartitionsToTxn v0, EndTxn v0,
    transactional Produce v7) against read_committed consumers."""
    bootstrap = module_broker.bootstrap
    topic = "txn-aiokafka"
    create_topic(bootstrap, topic, PARTITIONS)

    async def produce() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-1")
        await p.start()
        try:
            async with p.transaction():
                for i in range(4):
                    await p.send_and_wait(topic, b"c1-%d" % i, partition=i % PARTITIONS)
            try:
                async with p.transaction():
                    for i in range(4):
                        await p.send_and_wait(topic, b"a-%d" % i, partition=i % PARTITIONS)
                    raise _Abort
            except _Abort:
                pass
            async with p.transaction():
                await p.send_and_wait(topic, b"c2", partition=0)
        finally:
            await p.stop()

    asyncio.run(produce())
    want = [b"c1-0", b"c1-1", b"c1-2", b"c1-3", b"c2"]
    assert _confluent(bootstrap, topic, "read_committed", len(want)) == want
    assert _kafka_python(bootstrap, topic, len(want)) == want
    assert _aiokafka(bootstrap, topic, len(want)) == want
