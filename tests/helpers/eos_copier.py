"""A consume-transform-produce copier for exactly-once tests, run as its own process
(``python -m tests.helpers.eos_copier BOOTSTRAP SOURCE SINK TOTAL PARTITIONS DEADLINE_FILE``).

It copies ``SOURCE`` to ``SINK`` in transactions that carry the consumer's offsets
(``send_offsets_to_transaction``), as Kafka Streams does, and survives broker crashes the
way an application must: an abortable error aborts the transaction and rewinds the consumer to
the group's committed offsets; a retriable commit is retried; a fatal error (a fenced
producer) exits with status 3, a loop stuck in the client past its timeouts is killed by the
test (``Deadline``), and the test starts a new copier, whose InitProducerId fences any zombie.
It exits 0 once the group's committed offsets cover ``TOTAL`` records.
"""

from __future__ import annotations

import os
import sys
import time

import confluent_kafka as ck

GROUP = "eos-copier"
TRANSACTIONAL_ID = "eos-copier-tx"
#: Every transactional call's timeout. librdkafka 2.16 can block ``send_offsets_to_transaction``
#: past it (confluentinc/librdkafka#5456: the coordinator request's timeout is never checked;
#: #5511: it waits forever on a group coordinator that a broker's crash decommissioned), so the
#: test kills a copier whose loop made no step for ``STALL_S``, as a supervisor kills a hung
#: worker, and starts a successor, whose InitProducerId fences it. The killing is done from
#: outside: a thread of the hung process itself did not always get to run.
API_TIMEOUT_S = 30
STALL_S = API_TIMEOUT_S + 15
#: librdkafka >= 2.10 re-bootstraps (KIP-899) once every broker it knows is down, which a
#: single broker's kill -9 always is. It decommissions the broker that had the in-flight
#: produce, and the partition's drain then waits for a request that never completes, so the
#: transaction hangs until the coordinator's timeout fences it (and the watchdog ends the
#: copier). Re-bootstrapping from the one address it already has gains nothing; in the
#: three-broker test at most one broker is down, so it never re-bootstraps there anyway.
METADATA_RECOVERY = "none"


class Deadline:
    """Publishes, in a file the test reads, the wall-clock time by which the loop takes its
    next step: ``STALL_S`` from now, or the allowance of a call with a longer timeout."""

    def __init__(self, path: str) -> None:
        self._path = path

    def beat(self, timeout_s: float | None = None) -> None:
        allowed = STALL_S if timeout_s is None else timeout_s + STALL_S - API_TIMEOUT_S
        with open(self._path, "w") as f:
            f.write(f"{time.time() + allowed:.3f}")


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


def main(
    bootstrap: str, source: str, sink: str, total: int, partitions: int, deadline_file: str
) -> int:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
            "session.timeout.ms": 6000,
            "metadata.recovery.strategy": METADATA_RECOVERY,
        }
    )
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TRANSACTIONAL_ID,
            "transaction.timeout.ms": 10000,
            "linger.ms": 5,
            "metadata.recovery.strategy": METADATA_RECOVERY,
            # librdkafka's own debug contexts (e.g. "eos,msg") to follow a failing run
            **({"debug": debug} if (debug := os.environ.get("EOS_COPIER_DEBUG")) else {}),
        }
    )
    watchdog = Deadline(deadline_file)
    watchdog.beat(60)
    producer.init_transactions(60)
    consumer.subscribe([source])
    in_txn = False
    try:
        while True:
            watchdog.beat()
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
                    API_TIMEOUT_S,
                )
                while True:
                    try:
                        watchdog.beat()
                        producer.commit_transaction(API_TIMEOUT_S)
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
                    watchdog.beat(60)
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
    sys.exit(main(args[0], args[1], args[2], int(args[3]), int(args[4]), args[5]))
