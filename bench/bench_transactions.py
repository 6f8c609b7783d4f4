"""Transactional against idempotent produce, in the same run against the same broker.

confluent-kafka writes 1 KiB messages (acks=all, no compression) into one partition of a
real ``tierlog serve``, as an idempotent producer and as a transactional producer that commits
every 100 ms (issue 14's benchmark), the same number of bytes each into its own topic. Rounds
alternate which goes first (on a shared 2-core VM the first phase of a run pays for warm-up
and whatever the neighbours do). For each phase: payload MiB/s and the broker's CPU seconds per
GiB (utime+stime from /proc); the report gives every round and the median
transactional/idempotent ratios. Each phase starts once the broker is idle.

Run: ``.venv/bin/python bench/bench_transactions.py [--mib 128] [--rounds 3] [--dir /tmp]``;
``TIERLOG_BENCH_MIB=64`` scales it down (``--mib`` wins over it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

sys.path.insert(0, str(Path(__file__).parent))

from bench_produce_consume import Broker, settle

MESSAGE = 1024
COMMIT_EVERY_S = 0.1


@dataclass
class Result:
    name: str
    payload: int
    wall_s: float
    cpu_s: float
    transactions: int = 0

    @property
    def mib_s(self) -> float:
        return self.payload / 2**20 / self.wall_s

    @property
    def cpu_per_gib(self) -> float:
        return self.cpu_s / (self.payload / 2**30)


def _producer_config(bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 256 * 1024,
        "compression.type": "none",
        "enable.idempotence": True,
    }


def _send(p: ck.Producer, topic: str, payload: bytes, on_delivery: Callable[..., None]) -> None:
    while True:
        try:
            p.produce(topic, payload, partition=0, on_delivery=on_delivery)
            return
        except BufferError:
            p.poll(0.005)


def idempotent(bootstrap: str, topic: str, count: int) -> int:
    p = ck.Producer(_producer_config(bootstrap))
    failed = 0

    def done(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal failed
        failed += err is not None

    payload = os.urandom(MESSAGE)
    for _ in range(count):
        _send(p, topic, payload, done)
    if p.flush(300) != 0 or failed:
        raise RuntimeError(f"{failed} idempotent deliveries failed")
    return 0


def transactional(bootstrap: str, topic: str, count: int) -> int:
    """Commit every ``COMMIT_EVERY_S``; returns the number of transactions."""
    p = ck.Producer({**_producer_config(bootstrap), "transactional.id": "bench-txn"})
    p.init_transactions(60)
    failed = 0

    def done(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal failed
        failed += err is not None

    payload = os.urandom(MESSAGE)
    sent = transactions = 0
    while sent < count:
        p.begin_transaction()
        until = time.monotonic() + COMMIT_EVERY_S
        while sent < count and (time.monotonic() < until or sent % 1000):
            _send(p, topic, payload, done)
            sent += 1
        p.commit_transaction(60)
        transactions += 1
    if failed:
        raise RuntimeError(f"{failed} transactional deliveries failed")
    return transactions


def measure(broker: Broker, name: str, payload: int, fn: Callable[[], int]) -> Result:
    settle(broker)
    u0, s0 = broker.cpu_s()
    w0 = time.perf_counter()
    txns = fn()
    wall = time.perf_counter() - w0
    u1, s1 = broker.cpu_s()
    return Result(name, payload, wall, (u1 - u0) + (s1 - s0), txns)


def run(root: Path, mib: int, rounds: int) -> int:
    count = mib * 2**20 // MESSAGE
    payload = count * MESSAGE
    broker = Broker(root)
    pairs: list[tuple[Result, Result]] = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        names = [f"bench-{kind}-{i}" for i in range(rounds) for kind in ("idem", "txn")]
        for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
            f.result(30)
        for i in range(rounds):

            def idem(i: int = i) -> int:
                return idempotent(broker.bootstrap, f"bench-idem-{i}", count)

            def txn(i: int = i) -> int:
                return transactional(broker.bootstrap, f"bench-txn-{i}", count)

            if i % 2 == 0:
                a = measure(broker, "idempotent", payload, idem)
                b = measure(broker, "transactional", payload, txn)
            else:
                b = measure(broker, "transactional", payload, txn)
                a = measure(broker, "idempotent", payload, idem)
            pairs.append((a, b))
    finally:
        broker.stop()
    print(f"{mib} MiB of {MESSAGE}-byte messages per phase, acks=all, one partition")
    for i, pair in enumerate(pairs):
        for r in pair:
            extra = f", {r.transactions} transactions" if r.transactions else ""
            print(
                f"  round {i} {r.name:<14} {r.mib_s:7.1f} MiB/s  broker "
                f"{r.cpu_per_gib:5.2f} CPU-s/GiB  ({r.wall_s:.1f} s{extra})"
            )
    speed = statistics.median(t.mib_s / i.mib_s for i, t in pairs)
    cpu = statistics.median(t.cpu_per_gib / i.cpu_per_gib for i, t in pairs)
    print(f"  median transactional/idempotent: throughput {speed:.2f}x, CPU per GiB {cpu:.2f}x")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=int(os.environ.get("TIERLOG_BENCH_MIB", "128")))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        return run(Path(d), args.mib, args.rounds)


if __name__ == "__main__":
    sys.exit(main())
