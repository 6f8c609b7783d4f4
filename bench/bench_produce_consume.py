"""End-to-end broker throughput: confluent-kafka produces 1 KiB messages with acks=1 into a
real ``tierlog serve`` process, then kcat consumes all of them from the beginning.

For each phase it reports payload MiB/s, the broker's CPU seconds per GiB (utime+stime of
the broker process from /proc/<pid>/stat, i.e. its own rusage, all threads) and the
broker's peak RSS (VmRSS sampled every 20 ms). The consume phase also reports the peak RSS
of each quarter of the phase: a broker that buffers what it serves grows from quarter to
quarter, a bounded one stays flat. A raw-disk baseline writes and reads the same number
of bytes in 1 MiB chunks in the same directory, before starting and after stopping the
broker: on this VM the kernel's page-cache write cost alone swings between ~0.2 and ~2.5
CPU-s/GiB with memory pressure, so the broker's sys time must be read against it. Each phase
starts once the broker is idle.

Targets (issue 2, 2-core machine): <= 2 broker CPU-s per GiB produced, <= 0.7 per GiB
consumed, RSS bounded while consuming.

Run: ``.venv/bin/python bench/bench_produce_consume.py [--mib 1024] [--dir /tmp]``;
``TIERLOG_BENCH_MIB=64`` scales it down for a quick run (``--mib`` wins over it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

MESSAGE = 1024
TOPIC = "bench"
CHUNK = 1024 * 1024
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# ---- the broker process ----------------------------------------------------------------------
class Broker:
    """``tierlog serve`` in a temp dir on free ports, ready once it prints its ready line."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log_dir = root / "data"
        overrides = {
            "log.dirs": str(self.log_dir),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "metrics.listener": "http://127.0.0.1:0",
            "auto.create.topics.enable": "false",
        }
        cmd = [sys.executable, "-m", "tierlog", "serve"]
        for k, v in overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self._out = root / "broker.stdout"
        self._err = root / "broker.stderr"
        with open(self._out, "wb") as out, open(self._err, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=root)
        self.bootstrap = self._wait_ready(60.0)

    def _wait_ready(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self._out.read_text(errors="replace").splitlines():
                if line.startswith("tierlog ready:"):
                    fields = dict(f.split("=", 1) for f in line.split()[2:] if "=" in f)
                    return fields["bootstrap"]
            if self.proc.poll() is not None:
                raise RuntimeError("broker exited:\n" + self._err.read_text()[-3000:])
            time.sleep(0.05)
        raise RuntimeError("broker not ready:\n" + self._err.read_text()[-3000:])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_s(self) -> tuple[float, float]:
        """(utime, stime) of the broker process (all its threads), in seconds."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[11]) / _TICKS, int(fields[12]) / _TICKS

    def rss_bytes(self) -> int:
        statm = Path(f"/proc/{self.pid}/statm").read_text().split()
        return int(statm[1]) * _PAGE

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@dataclass
class RssSampler:
    """Samples the broker's RSS in a thread; ``mark`` starts a new named phase."""

    broker: Broker
    interval_s: float = 0.02
    samples: list[tuple[float, str, int]] = field(default_factory=list)
    _phase: str = "idle"
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), self._phase, self.broker.rss_bytes()))
            except (FileNotFoundError, ProcessLookupError):
                return
            self._stop.wait(self.interval_s)

    def mark(self, phase: str) -> None:
        self._phase = phase
        self.samples.append((time.monotonic(), phase, self.broker.rss_bytes()))

    def stop(self) -> None:
        self._stop.set()

    def phase(self, name: str) -> list[tuple[float, int]]:
        return [(t, rss) for t, p, rss in self.samples if p == name]


@dataclass
class Phase:
    name: str
    payload_bytes: int
    wall_s: float
    broker_user_s: float
    broker_sys_s: float
    peak_rss: int
    start_rss: int

    @property
    def mib_s(self) -> float:
        return self.payload_bytes / 2**20 / self.wall_s

    @property
    def broker_cpu_s(self) -> float:
        return self.broker_user_s + self.broker_sys_s

    @property
    def cpu_per_gib(self) -> float:
        return self.broker_cpu_s / (self.payload_bytes / 2**30)

    def per_gib(self, seconds: float) -> float:
        return seconds / (self.payload_bytes / 2**30)


# ---- phases ----------------------------------------------------------------------------------
def produce(bootstrap: str, count: int) -> None:
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 256 * 1024,
            "compression.type": "none",
        }
    )
    payload = os.urandom(MESSAGE)
    failed = 0

    def on_delivery(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    produce_one = p.produce
    for _ in range(count):
        while True:
            try:
                produce_one(TOPIC, payload, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(300) != 0 or failed:
        raise RuntimeError(f"{failed} deliveries failed or flush timed out")


def consume_with_kcat(bootstrap: str, count: int, out_file: Path) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise RuntimeError("kcat is required (apt-get install -y kcat)")
    cmd = [kcat, "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q"]
    cmd += ["-f", "%o\\n"]  # offsets only: kcat still fetches every byte, writes little
    with open(out_file, "wb") as out:
        subprocess.run(cmd, stdout=out, check=True, timeout=3600)
    with open(out_file, "rb") as f:
        lines = f.read().split()
    if len(lines) != count or int(lines[-1]) != count - 1:
        raise RuntimeError(f"kcat read {len(lines)} records, expected {count}")


@dataclass
class RawIo:
    mib_s: float
    cpu_per_gib: float


def raw_disk(root: Path, size: int) -> tuple[RawIo, RawIo]:
    """Write then read ``size`` bytes in 1 MiB chunks (no fsync, like the log): MiB/s and
    this process's CPU-s/GiB, which is almost all kernel time (page cache copy, ext4)."""
    path = root / "raw.bin"
    chunk = os.urandom(CHUNK)
    gib = size / 2**30

    def cpu() -> float:
        t = os.times()
        return t.user + t.system

    c0, t0 = cpu(), time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        left = size
        while left > 0:
            left -= f.write(chunk[: min(CHUNK, left)])
    write = RawIo(size / 2**20 / (time.perf_counter() - t0), (cpu() - c0) / gib)
    buf = bytearray(CHUNK)
    c0, t0 = cpu(), time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    read = RawIo(size / 2**20 / (time.perf_counter() - t0), (cpu() - c0) / gib)
    path.unlink()
    return write, read


def settle(broker: Broker, timeout_s: float = 30.0) -> None:
    """Wait until the broker is idle (< 5% of a core over 0.25 s), so that start-up work
    such as the background schema preload is not charged to a phase."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = sum(broker.cpu_s())
        time.sleep(0.25)
        if sum(broker.cpu_s()) - before < 0.0125:
            return
    print(f"  (broker still busy after {timeout_s:.0f} s; measuring anyway)")


def measure(
    name: str, broker: Broker, sampler: RssSampler, payload: int, fn: Callable[[], None]
) -> Phase:
    settle(broker)
    sampler.mark(name)
    start_rss = broker.rss_bytes()
    (u0, s0), w0 = broker.cpu_s(), time.perf_counter()
    fn()
    wall, (u1, s1) = time.perf_counter() - w0, broker.cpu_s()
    sampler.mark(f"after-{name}")
    peak = max(rss for _, rss in sampler.phase(name))
    return Phase(name, payload, wall, u1 - u0, s1 - s0, peak, start_rss)


def quarter_peaks(samples: list[tuple[float, int]]) -> list[int]:
    if not samples:
        return []
    t0, t1 = samples[0][0], samples[-1][0]
    span = max(t1 - t0, 1e-9)
    peaks = [0, 0, 0, 0]
    for t, rss in samples:
        q = min(int((t - t0) / span * 4), 3)
        peaks[q] = max(peaks[q], rss)
    return peaks


def run(root: Path, mib: int) -> int:
    count = mib * 2**20 // MESSAGE
    payload = count * MESSAGE
    # the kernel's page-cache write cost varies with memory pressure: measure it before and
    # after the broker run (log size estimated from the per-record overhead of a v2 batch)
    raw_before = raw_disk(root, count * (MESSAGE + 10))
    broker = Broker(root)
    sampler = RssSampler(broker)
    sampler.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        idle_rss = broker.rss_bytes()
        bootstrap = broker.bootstrap
        prod = measure("produce", broker, sampler, payload, lambda: produce(bootstrap, count))
        log_bytes = sum(f.stat().st_size for f in (broker.log_dir / f"{TOPIC}-0").glob("*.log"))
        cons = measure(
            "consume",
            broker,
            sampler,
            payload,
            lambda: consume_with_kcat(broker.bootstrap, count, root / "kcat.out"),
        )
        quarter_rss = quarter_peaks(sampler.phase("consume"))
        del admin  # its connection would only log reconnect noise once the broker stops
    finally:
        sampler.stop()
        broker.stop()
    raw_after = raw_disk(root, log_bytes)

    mb = 2**20
    print(f"bench_produce_consume: {count} x {MESSAGE} B messages = {payload / mb:.0f} MiB")
    print(f"  on-disk log {log_bytes / mb:.0f} MiB; broker idle RSS {idle_rss / mb:.0f} MiB")
    head = f"  {'phase':<26}{'MiB/s':>8}{'CPU-s/GiB':>11}{'(user+sys)':>13}{'target':>8}"
    print(head + f"{'peak RSS MiB':>14}")
    for ph, target in ((prod, 2.0), (cons, 0.7)):
        verdict = "ok" if ph.cpu_per_gib <= target else "MISS"
        split = f"{ph.per_gib(ph.broker_user_s):.2f}+{ph.per_gib(ph.broker_sys_s):.2f}"
        print(
            f"  {ph.name + ' (broker)':<26}{ph.mib_s:>8.1f}{ph.cpu_per_gib:>11.2f}{split:>13}"
            f"{'<=' + str(target):>8}{ph.peak_rss / mb:>14.0f}  {verdict}"
        )
    for when, (raw_w, raw_r) in (("before", raw_before), ("after", raw_after)):
        for label, raw in (("write", raw_w), ("read", raw_r)):
            name = f"raw {label}, {when}"
            print(f"  {name:<26}{raw.mib_s:>8.1f}{raw.cpu_per_gib:>11.2f}")
    quarters = " / ".join(f"{q / mb:.0f}" for q in quarter_rss)
    print(f"  consume RSS: start {cons.start_rss / mb:.0f} MiB, peak per quarter {quarters} MiB")
    print(
        f"  broker CPU-s: produce {prod.broker_cpu_s:.2f} in {prod.wall_s:.1f} s, "
        f"consume {cons.broker_cpu_s:.2f} in {cons.wall_s:.1f} s"
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_mib = int(os.environ.get("TIERLOG_BENCH_MIB", "1024"))
    ap.add_argument("--mib", type=int, default=default_mib, help="payload volume (MiB)")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_pc_", dir=args.dir))
    try:
        return run(root, args.mib)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
