"""Transactional producers of aiokafka and kafkajs against a real ``tierlog serve``: each
commits one transaction and aborts another, and a read_committed consumer sees only the
committed records (kafka-python's read_committed consumer reads them too)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import textwrap
from pathlib import Path

from aiokafka import AIOKafkaProducer
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.helpers.broker import BrokerProcess
from tests.helpers.txn_clients import create_topic, read_all

NODE_MODULES = Path(__file__).resolve().parents[2] / ".tools" / "node_modules"


def _kafka_python_read_committed(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    try:
        tp = KpTopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out = [bytes(m.value) for m in c]
        assert len(out) >= expect
        return out
    finally:
        c.close()


def test_aiokafka_transactions_commit_and_abort(broker: BrokerProcess) -> None:
    create_topic(broker, "aio")

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-tx")
        await p.start()
        try:
            await p.begin_transaction()
            await p.send_and_wait("aio", b"aborted", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait("aio", b"committed", partition=0)
        finally:
            await p.stop()

    asyncio.run(run())
    assert read_all(broker.bootstrap, "aio", "read_committed", 1) == [b"committed"]
    assert _kafka_python_read_committed(broker.bootstrap, "aio", 1) == [b"committed"]
    assert sorted(read_all(broker.bootstrap, "aio", "read_uncommitted", 2)) == [
        b"aborted",
        b"committed",
    ]


_KAFKAJS = textwrap.dedent(
    """
    const { Kafka, logLevel } = require("kafkajs");
    const kafka = new Kafka({ brokers: [process.argv[1]], logLevel: logLevel.NOTHING });
    (async () => {
      const producer = kafka.producer({
        transactionalId: "kafkajs-tx", idempotent: true, maxInFlightRequests: 1,
      });
      await producer.connect();
      let txn = await producer.transaction();
      await txn.send({ topic: "js", messages: [{ value: "aborted", partition: 0 }] });
      await txn.abort();
      txn = await producer.transaction();
      await txn.send({ topic: "js", messages: [{ value: "committed", partition: 0 }] });
      await txn.commit();
      await producer.disconnect();
      console.log("done");
    })().catch((e) => { console.error(e); process.exit(1); });
    """
)


def test_kafkajs_transactions_commit_and_abort(broker: BrokerProcess) -> None:
    create_topic(broker, "js")
    done = subprocess.run(
        ["node", "-e", _KAFKAJS, broker.bootstrap],
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.strip() == b"done"
    assert read_all(broker.bootstrap, "js", "read_committed", 1) == [b"committed"]
    assert sorted(read_all(broker.bootstrap, "js", "read_uncommitted", 2)) == [
        b"aborted",
        b"committed",
    ]
