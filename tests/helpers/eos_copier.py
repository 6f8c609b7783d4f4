"""A consume-transform-produce copier for exactly-once tests, run as its own process
(``python -m tests.helpers.eos_copier BOOTSTRAP SOURCE SINK TOTAL``).

It copies ``SOURCE`` to ``SINK`` in transactions that carry the consumer's offsets
(``send_offsets_to_transaction``), as Kafka Streams does, and survives broker crashes the
way an application must: an abortable error aborts the transaction and rewinds the consumer to
the group's committed offsets; a retriable commit is retried; a fatal error (a fenced
producer) exits with status 3, and the test starts a new copier, whose InitProducerId fences
any zombie. It exits 0 once the group's committed offsets cover ``TOTAL`` records.
"""

from __future__ import annotations

import sys
import time

import confluent_kafka as ck

GROUP = "eos-copier"
TRANSACTIONAL_ID = "eos-copier-tx"


def _committed_total(consumer: ck.Consumer, source: str, partitions: int) -> int:
    tps = [ck.TopicPartition(source, p) for p in range(partitions)]
    return sum(max(tp.offset, 0) for tp in consumer.committed(tps, 10))


def _rewind(consumer: ck.Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, 10):
        offset = tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING
        consumer.seek(ck.TopicPartition(tp.topic, tp.partition, offset))


def main(bootstrap: str, source: str, sink: str, total: int, partitions: int) -> int:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
            "session.timeout.ms": 6000,
        }
    )
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TRANSACTIONAL_ID,
            "transaction.timeout.ms": 10000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    consumer.subscribe([source])
    in_txn = False
    try:
        while True:
            try:
                batch = consumer.consume(num_messages=50, timeout=0.5)
                batch = [m for m in batch if m.error() is None]
                if not batch:
                    if _committed_total(consumer, source, partitions) >= total:
                        return 0
                    continue
                producer.begin_transaction()
                in_txn = True
                for m in batch:
                    producer.produce(sink, b"out-" + bytes(m.value() or b""))
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()),
                    consumer.consumer_group_metadata(),
                    30,
                )
                while True:
                    try:
                        producer.commit_transaction(30)
                        break
                    except ck.KafkaException as e:
                        if not e.args[0].retriable():
                            raise
                in_txn = False
            except ck.KafkaException as e:
                error = e.args[0]
                print(f"copier: {error}", file=sys.stderr, flush=True)
                if error.fatal():
                    print(f"fatal: {error}", file=sys.stderr, flush=True)
                    return 3
                if in_txn and error.txn_requires_abort():
                    producer.abort_transaction(60)
                    in_txn = False
                    _rewind(consumer)
                elif in_txn:
                    print(f"unexpected: {error}", file=sys.stderr, flush=True)
                    return 4
                time.sleep(0.1)
    finally:
        consumer.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[0], args[1], args[2], int(args[3]), int(args[4])))
