"""kcat (librdkafka 2.0.2), kafka-python 3 and aiokafka 0.14 against a real broker.

Each client negotiates different API versions (spec/python-kafka-feasibility.md §4), so
together they cover old and flexible encodings of Produce, Fetch, Metadata and ListOffsets.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import aiokafka
import kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker import BrokerProcess


def _create(b: BrokerProcess, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def test_kcat_produce_and_consume(module_broker: BrokerProcess) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is required (apt-get install -y kcat)"
    _create(module_broker, "kcat-t")
    lines = [f"line-{i}" for i in range(200)]
    subprocess.run(
        [kcat, "-P", "-b", module_broker.bootstrap, "-t", "kcat-t", "-p", "0"],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        [kcat, "-C", "-b", module_broker.bootstrap, "-t", "kcat-t", "-o", "beginning", "-e"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.splitlines() == lines


def test_kafka_python_produce_and_consume(module_broker: BrokerProcess) -> None:
    _create(module_broker, "kp-t")
    producer = kafka.KafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=5)
    for i in range(100):
        producer.send("kp-t", value=b"kp-%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=module_broker.bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    tp = kafka.TopicPartition("kp-t", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 100:
            break
    consumer.close()
    assert got == [b"kp-%d" % i for i in range(100)]


def test_aiokafka_produce_and_consume(module_broker: BrokerProcess) -> None:
    _create(module_broker, "aio-t")

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=module_broker.bootstrap)
        await producer.start()
        try:
            for i in range(100):
                await producer.send("aio-t", value=b"aio-%d" % i, partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=module_broker.bootstrap, enable_auto_commit=False
        )
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition("aio-t", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            async with asyncio.timeout(30):
                while len(got) < 100:
                    batch = await consumer.getmany(tp, timeout_ms=1000)
                    got += [m.value for m in batch.get(tp, [])]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"aio-%d" % i for i in range(100)]
