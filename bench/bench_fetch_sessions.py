"""Fetch sessions (KIP-227): broker CPU for 1,000 idle partitions polled by one consumer.

Two brokers in the same run, one after the other, each with a topic of ``--partitions``
empty partitions: one with fetch sessions (``max.incremental.fetch.session.cache.slots``
1000, Kafka's default), one without (``=0``: every Fetch is answered as a full one, so the
client keeps sending full requests). A kafka-python consumer (which uses fetch sessions;
librdkafka 2.16 does not implement KIP-227 and always fetches sessionless) is assigned every
partition and polls for ``--seconds`` with ``fetch_max_wait_ms`` small, so the broker
answers a stream of empty fetches. The broker's CPU (utime + stime from /proc, all threads)
is read over that window, with the number of Fetch requests it answered (its metrics).

Run: ``.venv/bin/python bench/bench_fetch_sessions.py [--partitions 1000] [--seconds 20]
[--wait-ms 10]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import kafka
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

TOPIC = "idle"
_TICKS = os.sysconf("SC_CLK_TCK")


class Broker:
    """``tierlog serve`` in a temp dir on free ports, with ``overrides``."""

    def __init__(self, root: Path, overrides: dict[str, str]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        settings = {
            "log.dirs": str(root / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "metrics.listener": "http://127.0.0.1:0",
            "auto.create.topics.enable": "false",
            **overrides,
        }
        cmd = [sys.executable, "-m", "tierlog", "serve"]
        for k, v in settings.items():
            cmd += ["--override", f"{k}={v}"]
        self._out = root / "broker.stdout"
        self._err = root / "broker.stderr"
        with open(self._out, "wb") as out, open(self._err, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=root)
        self.bootstrap, self.metrics_url = self._wait_ready(60.0)

    def _wait_ready(self, timeout_s: float) -> tuple[str, str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self._out.read_text(errors="replace").splitlines():
                if line.startswith("tierlog ready:"):
                    fields = dict(f.split("=", 1) for f in line.split()[2:] if "=" in f)
                    return fields["bootstrap"], fields["metrics"]
            if self.proc.poll() is not None:
                raise RuntimeError("broker exited:\n" + self._err.read_text()[-3000:])
            time.sleep(0.05)
        raise RuntimeError("broker not ready:\n" + self._err.read_text()[-3000:])

    def cpu_s(self) -> float:
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS

    def metric(self, name: str, **labels: str) -> float:
        with urllib.request.urlopen(self.metrics_url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        return sum(
            float(s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Run:
    name: str
    fetches: float
    incremental: float
    cpu_s: float
    wall_s: float

    @property
    def cpu_per_s(self) -> float:
        return self.cpu_s / self.wall_s

    @property
    def cpu_ms_per_fetch(self) -> float:
        return 1000 * self.cpu_s / max(self.fetches, 1)


def run(root: Path, name: str, slots: int, partitions: int, seconds: float, wait_ms: int) -> Run:
    broker = Broker(root / name, {"max.incremental.fetch.session.cache.slots": str(slots)})
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)
        del admin
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=wait_ms,
        )
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                consumer.poll(timeout_ms=100)

        try:
            consumer.assign([kafka.TopicPartition(TOPIC, p) for p in range(partitions)])
            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            time.sleep(3.0)  # offsets looked up, sessions opened, the loop at its pace
            f0 = broker.metric("tierlog_requests_total", api="Fetch")
            i0 = broker.metric("tierlog_fetch_incremental_requests_total")
            c0, w0 = broker.cpu_s(), time.perf_counter()
            time.sleep(seconds)
            c1, w1 = broker.cpu_s(), time.perf_counter()
            f1 = broker.metric("tierlog_requests_total", api="Fetch")
            i1 = broker.metric("tierlog_fetch_incremental_requests_total")
            stop.set()
            poller.join(10)
        finally:
            consumer.close()
        return Run(name, f1 - f0, i1 - i0, c1 - c0, w1 - w0)
    finally:
        broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--wait-ms", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-sessions-") as tmp:
        root = Path(tmp)
        runs = [
            run(root, "without sessions", 0, args.partitions, args.seconds, args.wait_ms),
            run(root, "with sessions", 1000, args.partitions, args.seconds, args.wait_ms),
        ]
    print(
        f"{args.partitions} idle partitions, one kafka-python consumer, "
        f"fetch_max_wait_ms={args.wait_ms}, {args.seconds:.0f} s each"
    )
    print(
        f"  {'run':<18}{'fetches/s':>10}{'incremental':>13}{'broker CPU s/s':>16}"
        f"{'CPU ms/fetch':>14}"
    )
    for r in runs:
        print(
            f"  {r.name:<18}{r.fetches / r.wall_s:>10.1f}{r.incremental:>13.0f}"
            f"{r.cpu_per_s:>16.3f}{r.cpu_ms_per_fetch:>14.3f}"
        )
    base, sess = runs
    ratio = sess.cpu_per_s / base.cpu_per_s
    per_fetch = sess.cpu_ms_per_fetch / base.cpu_ms_per_fetch
    verdict = "ok" if ratio <= 0.2 else "MISS"
    print(
        f"  with/without: broker CPU {ratio:.2f}x (goal <= 0.2x: {verdict}), "
        f"per fetch {per_fetch:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
