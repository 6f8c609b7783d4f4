"""Replication in a three-broker cluster on a real ZooKeeper (issue 13's benchmarks).

Two measurements, each against a figure taken in the same run:

* **Failover.** A confluent-kafka producer sends acks=all to an RF=3,
  ``min.insync.replicas=2`` topic every 2 ms. The partition's leader is killed with SIGKILL,
  and the time from the kill to the first acknowledgement that arrives after it is one
  sample; the broker is restarted and the next round waits for the full ISR. The same is
  done with SIGTERM (controlled shutdown), where the old leader may still acknowledge after
  the signal, so that variant reports the longest gap between two acknowledgements that
  ends after the signal instead.
  p50 and p99 over ``TIERLOG_BENCH_KILLS`` rounds (20). The goal: kill p99 at most
  ``zookeeper.session.timeout.ms`` + 2 s; controlled shutdown p99 under 1 s.
* **Replication cost.** Broker CPU-seconds per GiB for an acks=all produce to the RF=3 topic
  plus one kcat read from the leader, summed over the leader and its followers, against a
  single-node broker doing the same produce (acks=1) plus read.

Run: ``python bench/bench_replication.py [--mib 256] [--kills 20] [--only cost|failover]``
(``make bench`` runs both).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.zookeeper import ZooKeeperServer
from tierlog.cluster import paths
from tierlog.cluster.znodes import PartitionState

TOPIC = "bench-replicated"
SESSION_TIMEOUT_MS = 6000
MESSAGE = 1024
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds of a process, all threads."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ---- the cluster -----------------------------------------------------------------------------
class Cluster:
    """A ZooKeeper and three brokers, each on free ports under one temp directory."""

    def __init__(self, root: Path) -> None:
        self.zk = ZooKeeperServer(root / "zookeeper", tick_time_ms=500)
        self.zk.start()
        root_client = KazooClient(hosts=self.zk.connect)
        root_client.start(30)
        root_client.ensure_path("/bench")
        root_client.stop()
        self.kazoo = KazooClient(hosts=self.zk.connect + "/bench")
        self.kazoo.start(30)
        self.brokers = {
            i: BrokerProcess(
                root / f"broker-{i}",
                overrides={
                    "zookeeper.connect": self.zk.connect + "/bench",
                    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                    "broker.id": str(i),
                    "remote.log.storage.system.enable": "false",
                    "replica.lag.time.max.ms": "10000",
                    "replica.fetch.wait.max.ms": "200",
                },
            ).start()
            for i in (1, 2, 3)
        }

    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def state(self) -> PartitionState | None:
        path = paths.partition_state(TOPIC, 0)
        if self.kazoo.exists(path) is None:
            return None
        return PartitionState.decode(self.kazoo.get(path)[0])

    def full_isr(self) -> bool:
        s = self.state()
        return s is not None and sorted(s.isr) == [1, 2, 3]

    def leader(self) -> int:
        s = wait_until(self.state, 30, what="partition state")
        return s.leader

    def create_topic(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap()})
        new = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([new], operation_timeout=15)[TOPIC].result(30)
        wait_until(self.full_isr, 30, what="full ISR")

    def close(self) -> None:
        for b in self.brokers.values():
            b.close()
        self.kazoo.stop()
        self.zk.stop()


# ---- failover --------------------------------------------------------------------------------
@dataclass
class AckLog:
    """Acknowledgement times of a steady acks=all producer running in its own thread."""

    bootstrap: str
    acks: list[float] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        p = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "log_level": 2,
                "linger.ms": 0,
                "message.timeout.ms": 120_000,
                "topic.metadata.refresh.interval.ms": 1000,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 100,
            }
        )

        def done(err: ck.KafkaError | None, _msg: ck.Message) -> None:
            if err is None:
                self.acks.append(time.monotonic())
            else:
                self.errors += 1

        while not self._stop.is_set():
            p.produce(TOPIC, b"x" * 100, partition=0, on_delivery=done)
            p.poll(0.002)
        p.flush(60)

    def first_after(self, t0: float, timeout_s: float) -> float:
        """Seconds from ``t0`` to the first acknowledgement after it (acks are in order)."""

        def first() -> float | None:
            i = bisect.bisect_right(self.acks, t0)
            return self.acks[i] if i < len(self.acks) else None

        return wait_until(first, timeout_s, what="an acknowledgement after the signal") - t0

    def longest_gap(self, t0: float, t1: float) -> float:
        """The longest gap between two acknowledgements that ends after the signal at
        ``t0`` (a gap that started before it counts whole); gaps over before the signal
        belong to the previous round's restart, not to this shutdown."""
        window = [t for t in self.acks if t0 - 1.0 <= t <= t1]
        gaps = [b - a for a, b in itertools.pairwise(window) if b > t0]
        return max(gaps, default=t1 - t0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)


def failover_rounds(cluster: Cluster, rounds: int, sig: signal.Signals) -> list[float]:
    log = AckLog(cluster.bootstrap())
    log.start()
    samples: list[float] = []
    try:
        wait_until(lambda: len(log.acks) > 50, 30, what="the producer running")
        for _ in range(rounds):
            victim = cluster.brokers[cluster.leader()]
            if sig == signal.SIGKILL:
                victim.kill()
                t0 = time.monotonic()
                samples.append(log.first_after(t0, 60))
            else:
                t0 = time.monotonic()
                victim.stop(60)
                log.first_after(time.monotonic() + 0.5, 60)
                samples.append(log.longest_gap(t0, time.monotonic()))
            victim.start()
            wait_until(cluster.full_isr, 60, what="the restarted broker back in the ISR")
    finally:
        log.stop()
    return samples


# ---- replication cost ------------------------------------------------------------------------
def produce(bootstrap: str, count: int, acks: str) -> None:
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 256 * 1024,
            "log_level": 2,
        }
    )
    payload = os.urandom(MESSAGE)
    failed = 0

    def on_delivery(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal failed
        failed += err is not None

    for _ in range(count):
        while True:
            try:
                p.produce(TOPIC, payload, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(600) != 0 or failed:
        raise RuntimeError(f"{failed} deliveries failed or flush timed out")


def consume(bootstrap: str, count: int) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise RuntimeError("kcat is required (make install)")
    cmd = [kcat, "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q"]
    out = subprocess.run([*cmd, "-f", "%o\\n"], capture_output=True, check=True, timeout=3600)
    lines = out.stdout.split()
    if len(lines) != count:
        raise RuntimeError(f"kcat read {len(lines)} records, expected {count}")


def settle(pids: list[int], timeout_s: float = 30.0) -> None:
    """Wait until the brokers are idle, so that start-up work is not charged to a phase."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = sum(cpu_s(p) for p in pids)
        time.sleep(0.5)
        if sum(cpu_s(p) for p in pids) - before < 0.05 * len(pids):
            return


def replication_cost(root: Path, mib: int) -> tuple[float, dict[str, float]]:
    """(single-node CPU-s/GiB, cluster CPU-s/GiB by role) for produce plus one read."""
    count = mib * 1024 * 1024 // MESSAGE
    gib = count * MESSAGE / 2**30
    single = BrokerProcess(root / "single").start()
    try:
        admin = AdminClient({"bootstrap.servers": single.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        settle([single.pid])
        c0 = cpu_s(single.pid)
        produce(single.bootstrap, count, "1")
        consume(single.bootstrap, count)
        single_cost = (cpu_s(single.pid) - c0) / gib
    finally:
        single.close()
    cluster = Cluster(root / "cluster")
    try:
        cluster.create_topic()
        leader = cluster.leader()
        pids = {i: b.pid for i, b in cluster.brokers.items()}
        settle(list(pids.values()))
        before = {i: cpu_s(p) for i, p in pids.items()}
        produce(cluster.bootstrap(), count, "all")
        consume(cluster.brokers[leader].bootstrap, count)
        wait_until(cluster.full_isr, 60, what="followers caught up")
        spent = {i: cpu_s(p) - before[i] for i, p in pids.items()}
    finally:
        cluster.close()
    followers = [spent[i] for i in spent if i != leader]
    by_role = {
        "leader": spent[leader] / gib,
        "one follower": statistics.mean(followers) / gib,
        "leader + one follower": (spent[leader] + statistics.mean(followers)) / gib,
        "all three": sum(spent.values()) / gib,
    }
    return single_cost, by_role


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=int(os.environ.get("TIERLOG_BENCH_MIB", "256")))
    ap.add_argument("--kills", type=int, default=int(os.environ.get("TIERLOG_BENCH_KILLS", "20")))
    ap.add_argument("--only", choices=["cost", "failover"], help="run one of the two measurements")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tierlog-bench-repl-"))
    try:
        if args.only != "failover":
            print(f"== replication cost: {args.mib} MiB of {MESSAGE} B records, produce + one read")
            single, by_role = replication_cost(root / "cost", args.mib)
            print(f"  single node (acks=1)        {single:6.2f} CPU-s/GiB")
            for role, cost in by_role.items():
                print(f"  RF=3 acks=all, {role:<22}{cost:6.2f} CPU-s/GiB  ({cost / single:.2f}x)")
        if args.only == "cost":
            return 0
        cluster = Cluster(root / "failover")
        try:
            cluster.create_topic()
            for sig in (signal.SIGKILL, signal.SIGTERM):
                samples = failover_rounds(cluster, args.kills, sig)
                goal = SESSION_TIMEOUT_MS / 1000 + 2 if sig == signal.SIGKILL else 1.0
                p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
                print(
                    f"== failover by {sig.name} x{len(samples)}: p50 {p50:.2f} s, "
                    f"p99 {p99:.2f} s, max {max(samples):.2f} s "
                    f"(goal p99 <= {goal:.1f} s: {'ok' if p99 <= goal else 'MISS'})"
                )
                print("  samples: " + " ".join(f"{s:.2f}" for s in samples))
        finally:
            cluster.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
