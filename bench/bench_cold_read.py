"""Cold consumer read through the broker: kcat reads a topic whose data is only in the
object store (an S3-compatible server behind ``latency_proxy.py`` adding ~50 ms per request)
and, in the same run, the same topic while its data is still local.

Measured (issue 5 benchmarks (b)-(d)):

* (b) kcat MiB/s, cold (remote-only data, object-store plugin with the disk chunk cache and
  16 MiB prefetch) against hot (the same bytes, local segments). Target: cold >= 0.8x hot.
  ``--baseline`` adds a cold read with no chunk cache and no prefetch (Aiven users report
  about 20 Mbit/s in that setting);
* (c) object-store GETs per GiB read, from the proxy's request log, split into chunk GETs of
  ``.log`` objects, ``.indexes`` GETs and manifest GETs. Target: chunk GETs <= 1.05 x
  GiB / chunk.size;
* (d) broker RSS (VmRSS sampled every 20 ms) before and during the cold read; the disk cache
  lives on disk, so the growth must stay within the memory caches (manifests, indexes) plus
  the chunks in flight, whatever the volume read.

Stores (``--store``, comma-separated, each a full run of its own): ``s3rver`` (Node, from npm
into ``.tools``; the default: fast enough on this machine that the proxy's latency, not the
emulator's CPU, shapes the read) and ``moto`` (a Python server, CPU-bound at ~70 MiB/s here).

How: two topics get the same volume of 1 KiB messages in 64 MiB segments: ``hot`` stays
local, ``cold`` has ``remote.storage.enable=true`` and ``local.retention.bytes=1``, so once
uploaded only its active segment stays local. Each round (``--rounds``, default 3) GETs
every chunk of the cold ``.log`` objects directly with as many parallel ranged GETs as the
prefetch allows ("raw": what the store behind the proxy can deliver to such a reader at
that moment), restarts the broker (the chunk caches start empty), lets kcat read
``cold``, repeats the raw GETs, and lets kcat read ``hot``. The round's ceiling is the mean
of its two raw reads, one on each side of the cold read. The machine is shared, so the
ratios are per round and the medians are reported. No reader with ``prefetch`` bytes in
flight can beat ``prefetch / latency`` (Little's law); that bound is printed too.

``--partitions N`` spreads the same volume over N partitions per topic; kcat reads them all in
one consumer, each partition has its own read-ahead, so raw GETs run N x the window at a time
and the bound is N x prefetch / latency. kcat runs with ``fetch.wait.max.ms=10``
(``--kcat-fetch-wait-ms``): its final Fetch at the end of the log waits that long, a fixed
cost inside both figures that at the default 500 ms dominated the hot read.

Each round then reads a second cold topic of the same volume without a restart
(``--second-pass``, on by default): what a broker that has served cold reads before spends
per GiB. The broker makes its GET buffer pool resident at start
(``fetch.buffers.pretouch.enabled``, ``--no-pretouch`` to leave it off); without that the
first cold read after a restart pays the pool's page faults (about a thousand per 4 MiB
slot, once per broker, and on a VM whose balloon reports free memory to the host, ten
times the cost of an ordinary fault).

``--ceiling`` then GETs every chunk straight from the store (no proxy, no broker, no kcat)
with 4 to 32 in flight: what any reader of that store can get on this machine, so the cold
read's ceiling before the proxy, the window or the broker enter.

Run: ``.venv/bin/python bench/bench_cold_read.py [--mib 512] [--store s3rver,moto] [--baseline]
[--partitions 4] [--ceiling] [--cache-class disk|memory|none]``;
``TIERLOG_BENCH_COLD_MIB=64`` scales the volume down for a quick run (``--mib`` wins).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import confluent_kafka as ck

sys.path.insert(0, str(Path(__file__).parent))

from latency_proxy import LatencyProxy
from tierlog.client import WireConnection
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.storage.objectstore.config import ObjectStoreConfig

MiB = 1024 * 1024
GiB = 1024 * MiB
MESSAGE = 1024
HOT, COLD = "hot", "cold"
#: ``--second-pass``: a second cold topic, read after ``COLD`` without a restart
SECOND = "second"
EARLIEST_LOCAL, LATEST_TIERED = -4, -5
_PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def poll(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


# ---- processes ---------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parent.parent
S3RVER = REPO / ".tools" / "node_modules" / ".bin" / "s3rver"
S3RVER_INSTALL = "npm install --silent --no-audit --no-fund --prefix .tools s3rver"


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class S3Server:
    """An S3-compatible server subprocess on a free loopback port, path-style addressing."""

    name = ""
    key_id = "bench"
    secret = "bench"
    #: ``--split-cores``: the CPUs of the store side (the server and the latency proxy); the
    #: bench, and so the broker, kcat and the ceiling's GETs, keep the others. None: all
    #: share every CPU.
    cpus: set[int] | None = None

    def __init__(self, root: Path, bucket: str) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = self._spawn(root, bucket)
        poll(self._up, 30, f"{self.name} listening")
        self._create_bucket(bucket)

    def _spawn(self, root: Path, bucket: str) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    @classmethod
    def pinned(cls) -> list[str]:
        """The command prefix that starts the server on the store side's CPUs, if split."""
        return [] if cls.cpus is None else ["taskset", "-c", ",".join(map(str, cls.cpus))]

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
        return port_open(self.port)

    def _create_bucket(self, bucket: str) -> None:
        pass

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Moto(S3Server):
    name = "moto"

    def _spawn(self, root: Path, bucket: str) -> subprocess.Popen[bytes]:
        server = str(Path(sys.executable).parent / "moto_server")
        return subprocess.Popen(
            [*self.pinned(), server, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _create_bucket(self, bucket: str) -> None:
        req = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        urllib.request.urlopen(req, timeout=10).close()  # moto checks no signatures


class S3rver(S3Server):
    """s3rver keeps objects as plain files; it checks signatures against S3RVER/S3RVER."""

    name = "s3rver"
    key_id = "S3RVER"
    secret = "S3RVER"

    def _spawn(self, root: Path, bucket: str) -> subprocess.Popen[bytes]:
        if not S3RVER.exists():
            raise RuntimeError(f"{S3RVER} is missing: run `{S3RVER_INSTALL}` in {REPO}")
        data = root / "s3rver"
        data.mkdir()
        return subprocess.Popen(
            [
                *self.pinned(),
                str(S3RVER),
                "-d",
                str(data),
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-s",
                "--configure-bucket",
                bucket,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


STORES: dict[str, type[S3Server]] = {"s3rver": S3rver, "moto": Moto}


class Broker:
    """``tierlog serve`` with the object-store plugin; ready once it prints its ready line."""

    def __init__(self, root: Path, overrides: Mapping[str, str]) -> None:
        self.root = root
        self.overrides = dict(overrides)
        self.proc: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.metrics_url = ""
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        out = self.root / f"broker{self.starts}.stdout"
        err = self.root / f"broker{self.starts}.stderr"
        cmd = [sys.executable, "-m", "tierlog", "serve"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        with open(out, "wb") as o, open(err, "wb") as e:
            self.proc = subprocess.Popen(cmd, stdout=o, stderr=e, cwd=self.root)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for line in out.read_text(errors="replace").splitlines():
                if line.startswith("tierlog ready:"):
                    fields = dict(f.split("=", 1) for f in line.split()[2:] if "=" in f)
                    self.bootstrap, self.metrics_url = fields["bootstrap"], fields["metrics"]
                    return
            if self.proc.poll() is not None:
                raise RuntimeError("broker exited:\n" + err.read_text()[-3000:])
            time.sleep(0.05)
        raise RuntimeError("broker not ready:\n" + err.read_text()[-3000:])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss(self) -> int:
        with open(f"/proc/{self.pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class RssSampler:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.broker.rss())
            self._stop.wait(0.02)


# ---- the wire ----------------------------------------------------------------------------------
def list_offset(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    with WireConnection.to_bootstrap(bootstrap) as c:
        r = c.list_offset(topic, partition, timestamp)
    if r.error_code != 0:
        raise RuntimeError(f"ListOffsets {timestamp}: error {r.error_code}")
    return int(r.offset)


def create_topic(bootstrap: str, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
    with WireConnection.to_bootstrap(bootstrap) as c:
        code, message = c.create_topic(topic, partitions, configs)
    if code != 0:
        raise RuntimeError(f"create topic: {message}")


def produce(
    bootstrap: str, topic: str, partitions: int, total_bytes: int, batch_bytes: int = 1 << 20
) -> int:
    """1 KiB messages round-robin over partitions, in batches of up to ``batch_bytes``;
    returns how many were sent."""
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 20,
            "batch.size": batch_bytes,
            "compression.type": "none",
            "queue.buffering.max.kbytes": 256 * 1024,
        }
    )
    pool = os.urandom(MESSAGE * 64)
    count = total_bytes // MESSAGE
    for i in range(count):
        start = (i * 997) % (len(pool) - MESSAGE)
        while True:
            try:
                producer.produce(topic, pool[start : start + MESSAGE], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1024 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError("produce did not complete")
    return count


@dataclass
class KcatRead:
    seconds: float
    messages: int
    per_partition: list[float] = field(default_factory=list)


def kcat_read(
    bootstrap: str, topic: str, fetch_wait_ms: int, partition: int | None = None
) -> KcatRead:
    """kcat reads every partition of the topic from the beginning to the end; seconds until
    it exits and the messages it printed. ``fetch_wait_ms`` is kcat's ``fetch.wait.max.ms``:
    its last Fetch, at the end of the log, waits that long before ``-e`` sees the end (the
    default 500 ms is a fixed cost inside both the cold and the hot figure)."""
    started = time.perf_counter()
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            *("-X", f"fetch.wait.max.ms={fetch_wait_ms}"),
            *(() if partition is None else ("-p", str(partition))),
            *("-o", "beginning", "-e", "-q", "-f", "%o\\n"),
        ],
        capture_output=True,
        check=True,
        timeout=3600,
    ).stdout
    return KcatRead(time.perf_counter() - started, out.count(b"\n"))


def kcat_read_each(bootstrap: str, topic: str, fetch_wait_ms: int, partitions: int) -> KcatRead:
    """One kcat per partition, all at once (eight consumers): seconds until the last one
    exits, with each partition's own time in ``per_partition``."""
    with ThreadPoolExecutor(partitions) as pool:
        reads = list(
            pool.map(lambda p: kcat_read(bootstrap, topic, fetch_wait_ms, p), range(partitions))
        )
    return KcatRead(
        max(r.seconds for r in reads),
        sum(r.messages for r in reads),
        [r.seconds for r in reads],
    )


_SAMPLED = {
    "tierlog_objectstore_read_ahead_window_bytes": "window",
    "tierlog_objectstore_read_ahead_streams": "streams",
    "tierlog_objectstore_read_ahead_bytes": "held",
    "tierlog_objectstore_read_wait_seconds_total": "wait",
}


class MetricsSampler:
    """The broker's read-ahead gauges every ``interval_s``: (seconds since start, window
    bytes summed over streams, open streams, bytes held against the budget, reader wait)."""

    def __init__(self, broker: Broker, interval_s: float = 0.1) -> None:
        self.url = broker.metrics_url + "/metrics"
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MetricsSampler:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def scrape(self) -> dict[str, float]:
        with urllib.request.urlopen(self.url, timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in _SAMPLED:
                out[_SAMPLED[name]] = float(value)
        return out

    def _run(self) -> None:
        while self.interval_s > 0 and not self._stop.is_set():
            try:
                self.samples.append((time.perf_counter() - self._started, self.scrape()))
            except OSError:
                pass
            self._stop.wait(self.interval_s)


# ---- the run -----------------------------------------------------------------------------------
def active_segment(log_dir: Path, topic: str, partition: int) -> int:
    """Base offset of a cold topic's active segment (the only one that stays local)."""
    files = sorted((log_dir / f"{topic}-{partition}").glob("*.log"), key=lambda f: f.name)
    return int(files[-1].name.split(".")[0])


@dataclass
class ColdRead:
    seconds: float
    messages: int
    rss_before: int
    rss_peak: int
    cpu_s: float
    store_cpu_s: float
    gets: dict[str, int]
    minor_faults: int = 0
    switches: int = 0
    by_thread: dict[str, float] = field(default_factory=dict)
    consumers: str = "one"
    per_partition: list[float] = field(default_factory=list)
    windows: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    fetches: float = 0.0
    fetch_s: float = 0.0  # the broker's time in those Fetches, from decoding to the response
    remote_reads: float = 0.0  # partitions read from the remote tier in those Fetches
    ready_reads: float = 0.0  # of which answered on the event loop
    expires: float = 0.0  # remote reads a Fetch stopped waiting for (remote.fetch.max.wait.ms)
    taken_over: float = 0.0  # of which a later Fetch at the same offset waited for
    get_range_s: float = 0.0  # the broker's ranged GETs' seconds, summed (chunks, indexes)
    kernel_s: float = 0.0  # of ``cpu_s``, the broker's time in the kernel


def fetch_requests(broker: Broker) -> tuple[float, float, float, float, float, float, float]:
    """Fetch requests the broker has handled and the seconds they took in all, from decoding
    to the response being ready (``tierlog_requests_total``,
    ``tierlog_request_latency_seconds_sum``): a read's CPU is mostly per Fetch, and kcat
    keeps one Fetch in flight, so its pace is one Fetch's time. Then the remote reads of
    all partitions, and those of them answered on the event loop (``read_ready``), which
    cost no thread hand-off. Then the remote reads a Fetch stopped waiting for, and those
    a later Fetch took over. Last the seconds of the object-store plugin's ranged GETs
    summed: over a read's duration, by Little's law, the GETs it kept in flight on average,
    against the ceiling's fixed number."""
    with urllib.request.urlopen(broker.metrics_url, timeout=5) as r:
        text = r.read().decode()
    count = seconds = remote = ready = expires = taken_over = get_range = 0.0
    for line in text.splitlines():
        if line.startswith('tierlog_requests_total{api="Fetch"}'):
            count = float(line.rsplit(" ", 1)[1])
        elif line.startswith('tierlog_request_latency_seconds_sum{api="Fetch"}'):
            seconds = float(line.rsplit(" ", 1)[1])
        elif line.startswith("tierlog_remote_fetch_requests_total{"):
            remote += float(line.rsplit(" ", 1)[1])
        elif line.startswith("tierlog_remote_fetch_ready_total{"):
            ready += float(line.rsplit(" ", 1)[1])
        elif line.startswith("tierlog_remote_fetch_expires_total{"):
            expires += float(line.rsplit(" ", 1)[1])
        elif line.startswith("tierlog_remote_fetch_taken_over_total{"):
            taken_over += float(line.rsplit(" ", 1)[1])
        elif line.startswith('tierlog_objectstore_request_seconds_sum{operation="get_range"}'):
            get_range = float(line.rsplit(" ", 1)[1])
    return count, seconds, remote, ready, expires, taken_over, get_range


def _user_and_kernel_seconds(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    return sum(_user_and_kernel_seconds(pid))


def kernel_seconds(pid: int) -> float:
    """The system part of ``cpu_seconds``: on loopback the sender's ``writev`` also runs the
    receiver's TCP path, so a read's socket traffic shows here, not in Python."""
    return _user_and_kernel_seconds(pid)[1]


def context_switches(pid: int) -> int:
    """Context switches of the live threads of ``pid``: each is a thread handing work to
    another or waiting for it, a cost of its own in a VM."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text()
        except OSError:  # the thread ended
            continue
        for line in text.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total


#: ``perf record`` options of ``--profile`` with ``BENCH_PERF=1`` (``BENCH_PERF_ARGS``:
#: e.g. ``-F 2999``, or ``-e page-faults -c 1`` to find where the page faults are taken);
#: the names of the broker's threads by id are written beside the profile (``.threads``).
PERF_ARGS = os.environ.get("BENCH_PERF_ARGS", "-F 499").split()


def thread_names(pid: int) -> dict[str, str]:
    """OS thread id -> Python thread name (pool threads by their prefix), from ``py-spy
    dump``; threads Python does not know (obstore's runtime) keep their OS name."""
    spy = Path(sys.executable).parent / "py-spy"
    try:
        out = subprocess.run(
            [str(spy), "dump", "--pid", str(pid)],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names: dict[str, str] = {}
    for m in re.finditer(r'^Thread (\d+) \([^)]*\): "([^"]*)"', out, re.M):
        names[m.group(1)] = re.sub(r"[_-]?\d+$", "", m.group(2))
    return names


def thread_cpu(pid: int, names: Mapping[str, str]) -> dict[str, float]:
    """CPU seconds of the live threads of ``pid`` by thread name: where a read's CPU goes,
    without a profiler's overhead. From ``schedstat`` (nanoseconds on a CPU), not ``stat``,
    whose clock ticks are truncated per thread: over the ~70 threads of a cold read that
    hid a third of the CPU."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            on_cpu_ns = int((task / "schedstat").read_text().split()[0])
        except OSError:
            continue
        name = names.get(task.name) or re.sub(
            r"[_-]?\d+$", "", stat[stat.index("(") + 1 : stat.rindex(")")]
        )
        out[name] = out.get(name, 0.0) + on_cpu_ns / 1e9
    return out


def minor_faults(pid: int) -> int:
    """Page faults served without I/O: a fresh mapping touched for the first time costs one
    per 4 KiB page, a few microseconds each in a VM, so they show up as broker CPU."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def wait_idle(broker: Broker, timeout_s: float = 60.0) -> None:
    """Wait until a freshly started broker stops using CPU on its own: after its ready line
    it still preloads the codec's schemas on the event loop (imports, ~1 s of CPU here),
    which would otherwise land inside the first read after a restart."""
    deadline = time.monotonic() + timeout_s
    before = cpu_seconds(broker.pid)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = cpu_seconds(broker.pid)
        if now - before < 0.02:  # under 8 % of a core over the last 250 ms
            return
        before = now
    raise RuntimeError(f"broker still busy {timeout_s}s after start")


def cold_read(
    broker: Broker,
    proxy: LatencyProxy,
    store: S3Server,
    fetch_wait_ms: int,
    profile: Path | None = None,
    consumers: str = "one",
    partitions: int = 1,
    sample_windows: bool = False,
    topic: str = COLD,
) -> ColdRead:
    proxy.reset_counts()
    before = broker.rss()
    fetches_before = fetch_requests(broker)
    cpu_before = cpu_seconds(broker.pid)
    kernel_before = kernel_seconds(broker.pid)
    faults_before = minor_faults(broker.pid)
    switches_before = context_switches(broker.pid)
    names = thread_names(broker.pid)
    threads_before = thread_cpu(broker.pid, names)
    store_before = cpu_seconds(store.proc.pid)
    spy = None
    if profile is not None:  # py-spy on the broker for the duration of the read
        spy = subprocess.Popen(
            ["perf", "record", *PERF_ARGS, "-g", "-p", str(broker.pid), "-o", str(profile)]
            if os.environ.get("BENCH_PERF")
            else [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--pid",
                str(broker.pid),
                "--threads",
                *("--rate", os.environ.get("BENCH_SPY_RATE", "100")),
                *(["--native"] if os.environ.get("BENCH_NATIVE") else []),
                *(["--gil"] if os.environ.get("BENCH_GIL") else []),
                "--format",
                "raw",
                "--output",
                str(profile),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # py-spy attaches asynchronously (a benchmark, not a test)
    # scraping the broker's metrics costs broker CPU: only in reads that plot the window
    windows = MetricsSampler(broker, 0.1 if sample_windows else 0.0)
    with RssSampler(broker) as sampler, windows:
        if consumers == "each":
            kc = kcat_read_each(broker.bootstrap, topic, fetch_wait_ms, partitions)
        else:
            kc = kcat_read(broker.bootstrap, topic, fetch_wait_ms)
    cpu = cpu_seconds(broker.pid) - cpu_before
    kernel = kernel_seconds(broker.pid) - kernel_before
    faults = minor_faults(broker.pid) - faults_before
    switches = context_switches(broker.pid) - switches_before
    names.update(thread_names(broker.pid))
    threads_after = thread_cpu(broker.pid, names)
    by_thread = {
        k: v - threads_before.get(k, 0.0)
        for k, v in threads_after.items()
        if v - threads_before.get(k, 0.0) > 0
    }
    store_cpu = cpu_seconds(store.proc.pid) - store_before
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        if profile is not None and os.environ.get("BENCH_PERF"):
            # perf knows threads by id only: name them for ``perf report --tid``
            Path(f"{profile}.threads").write_text(
                "".join(f"{tid} {name}\n" for tid, name in sorted(names.items()))
            )
    entries = proxy.entries()
    gets = {"log": 0, "indexes": 0, "manifest": 0}
    suffixes = {"log": ".log", "indexes": ".indexes", "manifest": ".rsm-manifest"}
    for method, path, _range in entries:
        for kind, suffix in suffixes.items():
            if method == "GET" and path.split("?", 1)[0].endswith(suffix):
                gets[kind] += 1
    peak = max(sampler.samples, default=before)
    return ColdRead(
        kc.seconds,
        kc.messages,
        before,
        peak,
        cpu,
        store_cpu,
        gets,
        faults,
        switches,
        by_thread,
        consumers,
        kc.per_partition,
        windows.samples,
        *(a - b for a, b in zip(fetch_requests(broker), fetches_before, strict=True)),
        kernel_s=kernel,
    )


@dataclass
class RawRead:
    seconds: float
    mean_get_s: float  # one ranged GET of a chunk, latency plus transfer, at this concurrency


def raw_parallel_get(
    backend: ObjectBackend, objects: list[tuple[str, int]], chunk: int, concurrency: int
) -> RawRead:
    """GET every chunk of ``objects`` with ranged GETs, ``concurrency`` at a time, in key
    order: what the store can deliver to readers with that much read-ahead in total."""
    ranges = [
        (key, start, min(start + chunk, size))
        for key, size in objects
        for start in range(0, size, chunk)
    ]

    def timed(r: tuple[str, int, int]) -> float:
        t0 = time.perf_counter()
        backend.get_range(r[0], r[1], r[2], "log")
        return time.perf_counter() - t0

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        durations = list(pool.map(timed, ranges))
    return RawRead(time.perf_counter() - started, statistics.fmean(durations))


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


@dataclass
class StoreRun:
    """Everything one store's run measured."""

    store: str
    sent: int
    remote_bytes: int
    produce_s: float
    upload_wait_s: float
    colds: list[ColdRead]
    hots: list[KcatRead]
    raws: list[RawRead]
    raw_store_cpu: list[float]
    base: ColdRead | None
    ceiling: list[tuple[int, float, float]]  # (GETs in flight, MiB/s, store CPU share)
    hot_cpu: list[float]
    waste: Waste | None
    first_bytes: list[float]
    single_get_s: float  # one chunk GET alone through the proxy: latency + transfer
    window_runs: list[ColdRead]  # extra cold reads with the window sampled (broker CPU)
    hot_fetches: list[float]  # Fetch requests of each round's hot read
    second_passes: list[ColdRead]  # ``--second-pass``: each round's read of ``SECOND``
    #: each round's ceiling measured before its cold reads too (``raws`` is after them): the
    #: round's ceiling is their mean, so a neighbour's load that comes or goes between the
    #: cold read and one of them moves the ratio half as much
    raws_before: list[RawRead]
    hot_kernel: list[float]  # of ``hot_cpu``, the broker's time in the kernel


def load_topics(
    broker: Broker, log_dir: Path, segment: str, args: argparse.Namespace
) -> tuple[int, float, float]:
    """Create and fill the hot topic and the cold ones, and wait until every cold segment
    but the active one is uploaded and deleted locally. Messages sent per topic, the
    seconds the first cold topic took to produce, and the wait for the uploads."""
    create_topic(broker.bootstrap, HOT, args.partitions, {"segment.bytes": segment})
    cold_topics = [COLD, SECOND] if args.second_pass else [COLD]
    for topic in cold_topics:
        create_topic(
            broker.bootstrap,
            topic,
            args.partitions,
            {
                "remote.storage.enable": "true",
                "segment.bytes": segment,
                "local.retention.bytes": "1",
            },
        )
    t0 = time.perf_counter()
    sent = produce(broker.bootstrap, COLD, args.partitions, args.mib * MiB, args.batch_kib * 1024)
    produce_s = time.perf_counter() - t0
    produce(broker.bootstrap, HOT, args.partitions, args.mib * MiB, args.batch_kib * 1024)
    if args.second_pass:
        produce(broker.bootstrap, SECOND, args.partitions, args.mib * MiB, args.batch_kib * 1024)
    t0 = time.perf_counter()
    for topic in cold_topics:
        for p in range(args.partitions):
            active = active_segment(log_dir, topic, p)
            poll(
                partial(
                    lambda topic, p, active: (
                        list_offset(broker.bootstrap, topic, p, EARLIEST_LOCAL) == active
                    ),
                    topic,
                    p,
                    active,
                ),
                1800,
                f"{topic}-{p} uploaded and deleted locally",
            )
    upload_wait_s = time.perf_counter() - t0
    return sent, produce_s, upload_wait_s


def run_store(store_name: str, args: argparse.Namespace) -> StoreRun:
    root = Path(tempfile.mkdtemp(prefix="tierlog-cold-", dir=args.dir))
    bucket = f"cold-{uuid.uuid4().hex[:12]}"
    store = STORES[store_name](root, bucket)
    proxy = LatencyProxy("127.0.0.1", store.port, latency_s=args.latency_ms / 1000)
    proxy.start()
    if S3Server.cpus is not None:
        proxy.pin(S3Server.cpus)
    log_dir = root / "data"
    rsm = {
        "storage.url": f"s3://{bucket}/tiered",
        "storage.s3.endpoint.url": f"http://127.0.0.1:{proxy.port}",
        "storage.s3.region": "us-east-1",
        "storage.s3.path.style.access.enabled": "true",
        "storage.aws.access.key.id": store.key_id,
        "storage.aws.secret.access.key": store.secret,
        "chunk.size": str(args.chunk_mib * MiB),
        "fetch.chunk.cache.class": args.cache_class,
        "fetch.chunk.cache.path": str(root / "chunk-cache"),
        "fetch.chunk.cache.size": str(args.cache_mib * MiB),
        "fetch.chunk.cache.prefetch.max.size": str(args.prefetch_mib * MiB),
        "fetch.chunk.cache.prefetch.total.max.size": str(args.budget_mib * MiB),
        "fetch.buffers.pretouch.enabled": str(args.pretouch).lower(),
        **transform_props(args.transform, root),
    }
    overrides = {
        "log.dirs": str(log_dir),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "metrics.listener": "http://127.0.0.1:0",
        "auto.create.topics.enable": "false",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "500",
        "log.segment.delete.delay.ms": "0",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "remote.log.storage.manager.class.name": "objectstore",
        **{f"rsm.config.{k}": v for k, v in rsm.items()},
        **dict(o.split("=", 1) for o in args.override),
    }
    backend = ObjectBackend.from_config(ObjectStoreConfig.from_props(rsm))
    broker = Broker(root, overrides)
    colds: list[ColdRead] = []
    hots: list[KcatRead] = []
    raws: list[RawRead] = []
    raws_before: list[RawRead] = []
    raw_store_cpu: list[float] = []
    base: ColdRead | None = None
    ceiling: list[tuple[int, float, float]] = []
    segment = str(args.segment_mib * MiB)
    parallel = args.ceiling_inflight
    hot_cpu: list[float] = []
    hot_kernel: list[float] = []
    hot_fetches: list[float] = []
    waste: Waste | None = None
    first_bytes: list[float] = []
    window_runs: list[ColdRead] = []
    second_passes: list[ColdRead] = []
    single_get = RawRead(0.0, 0.0)
    try:
        broker.start()
        sent, produce_s, upload_wait_s = load_topics(broker, log_dir, segment, args)
        # loading leaves the local logs and the store's objects dirty in the page cache: their
        # writeback would otherwise run under the first round's reads
        os.sync()
        objects = remote_logs(backend, COLD)  # no transforms: stored size == segment size
        remote_bytes = sum(size for _, size in objects)
        modes = [m.strip() for m in args.consumers.split(",") if m.strip()]
        for r in range(args.rounds):
            raws_before.append(raw_parallel_get(backend, objects, args.chunk_mib * MiB, parallel))
            for i, mode in enumerate(modes):
                if r > 0 or i > 0:  # a restart empties the chunk caches (disk cache wiped)
                    restart(broker)
                colds.append(
                    cold_read(
                        broker,
                        proxy,
                        store,
                        args.kcat_fetch_wait_ms,
                        args.profile if r == 0 and i == 0 else None,
                        mode,
                        args.partitions,
                    )
                )
            if args.second_pass:
                # no restart: the GET buffer pool is already touched, as in a broker that
                # has served cold reads before, and the topic is one nothing has read yet
                second_passes.append(
                    cold_read(
                        broker,
                        proxy,
                        store,
                        args.kcat_fetch_wait_ms,
                        args.profile.with_suffix(".second") if args.profile and r == 0 else None,
                        modes[0],
                        args.partitions,
                        topic=SECOND,
                    )
                )
            store_before = cpu_seconds(store.proc.pid)
            raws.append(raw_parallel_get(backend, objects, args.chunk_mib * MiB, parallel))
            raw_store_cpu.append(cpu_seconds(store.proc.pid) - store_before)
            fetches_before = fetch_requests(broker)
            cpu_before = cpu_seconds(broker.pid)
            kernel_before = kernel_seconds(broker.pid)
            hots.append(kcat_read(broker.bootstrap, HOT, args.kcat_fetch_wait_ms))
            hot_cpu.append(cpu_seconds(broker.pid) - cpu_before)
            hot_kernel.append(kernel_seconds(broker.pid) - kernel_before)
            hot_fetches.append(fetch_requests(broker)[0] - fetches_before[0])
        single_get = raw_parallel_get(backend, objects[:1], args.chunk_mib * MiB, 1)
        if args.window_table:  # one more cold read per mode, its window sampled
            for mode in modes:
                restart(broker)
                window_runs.append(
                    cold_read(
                        broker,
                        proxy,
                        store,
                        args.kcat_fetch_wait_ms,
                        None,
                        mode,
                        args.partitions,
                        sample_windows=True,
                    )
                )
        if args.waste:
            restart(broker)
            waste = stop_half_way(broker, proxy, args.partitions)
        if args.first_byte:
            first_bytes = first_byte_runs(broker, proxy, objects, args.first_byte)
        if args.ceiling:
            # what the store alone can deliver on this machine: no proxy, no broker, no
            # kcat; more GETs in flight until it stops getting faster
            direct = ObjectBackend.from_config(
                ObjectStoreConfig.from_props(
                    {**rsm, "storage.s3.endpoint.url": f"http://127.0.0.1:{store.port}"}
                )
            )
            for inflight in (4, 8, 16, 32):
                store_before = cpu_seconds(store.proc.pid)
                got = raw_parallel_get(direct, objects, args.chunk_mib * MiB, inflight)
                busy = (cpu_seconds(store.proc.pid) - store_before) / got.seconds
                ceiling.append((inflight, remote_bytes / MiB / got.seconds, busy))
        if args.baseline:
            broker.stop()
            broker.overrides["rsm.config.fetch.chunk.cache.class"] = "none"
            broker.overrides["rsm.config.fetch.chunk.cache.prefetch.max.size"] = "0"
            broker.start()
            wait_idle(broker)
            base = cold_read(broker, proxy, store, args.kcat_fetch_wait_ms)
    finally:
        broker.stop()
        proxy.stop()
        store.stop()
        (None if os.environ.get("BENCH_KEEP") else shutil.rmtree(root, ignore_errors=True))
    return StoreRun(
        store_name,
        sent,
        remote_bytes,
        produce_s,
        upload_wait_s,
        colds,
        hots,
        raws,
        raw_store_cpu,
        base,
        ceiling,
        hot_cpu,
        waste,
        first_bytes,
        single_get.mean_get_s,
        window_runs,
        hot_fetches,
        second_passes,
        raws_before,
        hot_kernel,
    )


def transform_props(transform: str, root: Path) -> dict[str, str]:
    """Plugin settings for ``--transform``: none, zstd, or zstd+aes (a fresh RSA key pair)."""
    if transform == "none":
        return {}
    props = {"compression.enabled": "true"}
    if transform == "zstd+aes":
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private, public = root / "bench-key.pem", root / "bench-key.pub.pem"
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        props |= {
            "encryption.enabled": "true",
            "encryption.key.pair.id": "bench",
            "encryption.key.pairs": "bench",
            "encryption.key.pairs.bench.public.key.file": str(public),
            "encryption.key.pairs.bench.private.key.file": str(private),
        }
    return props


def restart(broker: Broker) -> None:
    broker.stop()
    broker.start()
    wait_idle(broker)


@dataclass
class Waste:
    consumed: int  # record bytes the consumer was served
    fetched: int  # chunk bytes GET from the store for them
    window: float  # the read-ahead window the stream had when the consumer stopped


def _range_bytes(header: str | None) -> int:
    if not header or not header.startswith("bytes="):
        return 0
    first, _, last = header[len("bytes=") :].partition("-")
    return int(last) - int(first) + 1 if last else 0


def stop_half_way(broker: Broker, proxy: LatencyProxy, partitions: int) -> Waste:
    """A consumer of partition 0 that reads half of it, 1 MiB per Fetch, and then stops:
    the chunk bytes fetched beyond what it was served, once read-ahead has settled."""
    end = list_offset(broker.bootstrap, COLD, 0, -1)
    start = list_offset(broker.bootstrap, COLD, 0, -2)
    proxy.reset_counts()
    consumed = 0
    offset = start
    with WireConnection.to_bootstrap(broker.bootstrap) as c:
        while offset < start + (end - start) // 2:
            code, records = c.fetch_raw(COLD, 0, offset, 1 << 20)
            if code != 0 or not records:
                raise RuntimeError(f"fetch at {offset}: error {code}")
            consumed += len(records)
            offset = last_offset(records) + 1
    wait_quiet(proxy, 2.0)
    fetched = sum(
        _range_bytes(r)
        for method, path, r in proxy.entries()
        if method == "GET" and path.split("?", 1)[0].endswith(".log")
    )
    window = MetricsSampler(broker).scrape().get("window", 0.0)
    return Waste(consumed, fetched, window)


def wait_quiet(proxy: LatencyProxy, quiet_s: float) -> None:
    """Until the broker's read-ahead is done: no request through the proxy for ``quiet_s``."""
    settled = len(proxy.entries())
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < quiet_s:
        time.sleep(0.1)
        if len(proxy.entries()) != settled:
            settled, quiet_since = len(proxy.entries()), time.monotonic()


def last_offset(records: bytes) -> int:
    """The last offset of the last whole batch in ``records``."""
    pos, last = 0, -1
    while pos + 61 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big", signed=True)
        length = int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        if pos + 12 + length > len(records):
            break
        delta = int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
        last = base + delta
        pos += 12 + length
    return last


_SEGMENT_KEY = re.compile(r"/(\d+)/(\d{20})-[^/]+\.log$")


def first_byte_runs(
    broker: Broker, proxy: LatencyProxy, objects: list[tuple[str, int]], runs: int
) -> list[float]:
    """Seconds to the first bytes of a Fetch at the first offset of a segment the broker
    has not touched since it started, ``runs`` times: every remote segment once per
    restart, restarting until there are enough."""
    starts = []
    for key, _size in objects:
        m = _SEGMENT_KEY.search(key)
        if m:
            starts.append((int(m.group(1)), int(m.group(2))))
    out: list[float] = []
    while len(out) < runs and starts:
        restart(broker)
        with WireConnection.to_bootstrap(broker.bootstrap) as c:
            c.fetch_raw(HOT, 0, 0, 1024)  # the connection and the Fetch path warmed
            for partition, offset in starts:
                if len(out) >= runs:
                    break
                wait_quiet(proxy, 0.5)  # the previous run's read-ahead is not in the way
                t0 = time.perf_counter()
                code, records = c.fetch_raw(COLD, partition, offset, 64 * 1024)
                elapsed = time.perf_counter() - t0
                if code == 0 and records:
                    out.append(elapsed)
    return out


def report(run: StoreRun, args: argparse.Namespace) -> None:
    total = run.sent * MESSAGE

    def rate(seconds: float) -> str:
        return f"{total / MiB / seconds:7.1f} MiB/s ({total * 8 / 1e6 / seconds:5.0f} Mbit/s)"

    remote_gib = run.remote_bytes / GiB
    chunk_target = 1.05 * run.remote_bytes / (args.chunk_mib * MiB)
    bound = (
        args.partitions * args.prefetch_mib / (args.latency_ms / 1000)
        if args.latency_ms > 0
        else float("inf")
    )
    print(
        f"== {run.store}: {total / MiB:.0f} MiB of 1 KiB messages per topic, "
        f"{args.partitions} partition(s); {run.remote_bytes / MiB:.0f} MiB remote in "
        f"{args.segment_mib} MiB segments; chunk {args.chunk_mib} MiB, prefetch "
        f"{args.prefetch_mib} MiB cap, budget {args.budget_mib} MiB, transforms {args.transform}, "
        f"{args.cache_class} cache {args.cache_mib} MiB; proxy "
        f"+{args.latency_ms:.0f} ms/request; kcat fetch.wait.max.ms={args.kcat_fetch_wait_ms}; "
        f"produce {total / MiB / run.produce_s:.0f} MiB/s, "
        f"last upload {run.upload_wait_s:.1f} s after produce; "
        + (
            f"store and proxy on CPU {sorted(S3Server.cpus)}, the rest off it; "
            if S3Server.cpus
            else ""
        )
        + "load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    modes = max(1, len(run.colds) // max(1, len(run.hots)))
    ratios: dict[str, list[float]] = {}
    for k, cold in enumerate(run.colds):
        r = k // modes
        hot, raw = run.hots[r], run.raws[r]
        bad = (
            ""
            if cold.messages == run.sent and hot.messages == run.sent
            else f" (!! {cold.messages}/{hot.messages} of {run.sent})"
        )
        before = run.raws_before[r]
        raw_rate = run.remote_bytes / MiB / ceiling_seconds(run, r)
        vs_ceiling = versus_ceiling(run, r, cold.seconds, total, args.transform)
        ratios.setdefault(cold.consumers, []).append(vs_ceiling)
        cpu_cold = cold.cpu_s / (total / GiB)
        cpu_hot = run.hot_cpu[r] / (total / GiB)
        spread = ""
        if cold.per_partition:
            mean = statistics.fmean(cold.per_partition)
            spread = (
                f"; per partition {min(cold.per_partition) / mean:.2f}-"
                f"{max(cold.per_partition) / mean:.2f}x of the mean time"
            )
        print(
            f"round {r + 1}, {cold.consumers} consumer(s): cold {rate(cold.seconds)}, hot "
            f"{rate(hot.seconds)}, ceiling {raw_rate:.1f} MiB/s ({args.ceiling_inflight} GETs "
            f"in flight through the proxy, mean GET {raw.mean_get_s * 1000:.0f} ms; "
            f"{run.remote_bytes / MiB / before.seconds:.0f} before the cold read, "
            f"{run.remote_bytes / MiB / raw.seconds:.0f} after); cold/ceiling "
            f"{vs_ceiling:.2f}x, cold/hot {hot.seconds / cold.seconds:.2f}x{bad}{spread}; "
            f"broker CPU per GiB cold {cpu_cold:.2f} s, hot {cpu_hot:.2f} s "
            f"({cpu_cold / max(cpu_hot, 1e-9):.1f}x); {run.store} busy "
            f"{cold.store_cpu_s / cold.seconds:.0%} of a core (cold), "
            f"{run.raw_store_cpu[r] / raw.seconds:.0%} (ceiling); broker "
            f"{cold.cpu_s / cold.seconds:.0%}"
        )
    for cold in run.window_runs:
        print(
            f"window against time, {cold.consumers} consumer(s), {args.partitions} partition(s) "
            f"(a separate cold read, {rate(cold.seconds)}, metrics scraped every 100 ms):"
        )
        print_windows(cold, args.chunk_mib)
    for mode, values in ratios.items():
        print(f"(b) {mode} consumer(s): cold/ceiling median {median(values):.2f}x (target >= 0.8x)")
    if run.waste is not None:
        w = run.waste
        print(
            f"(e) consumer stopped half-way through partition 0: served {w.consumed / MiB:.1f} "
            f"MiB, chunks fetched {w.fetched / MiB:.1f} MiB, wasted "
            f"{(w.fetched - w.consumed) / MiB:.1f} MiB; its window then {w.window / MiB:.1f} MiB "
            f"(+ the chunk it was in, {args.chunk_mib} MiB)"
        )
    if run.first_bytes:
        print(
            f"(f) first byte of an untouched segment after a restart, {len(run.first_bytes)} "
            f"runs: p50 {median(run.first_bytes) * 1000:.0f} ms (min "
            f"{min(run.first_bytes) * 1000:.0f}, max {max(run.first_bytes) * 1000:.0f}); one "
            f"chunk GET alone through the proxy {run.single_get_s * 1000:.0f} ms "
            f"(target: p50 <= that); ratio {median(run.first_bytes) / run.single_get_s:.2f}x"
        )
    print(
        f"(b) bound for {args.partitions} reader(s) with {args.prefetch_mib} MiB in flight each "
        f"at +{args.latency_ms:.0f} ms: {bound:.0f} MiB/s (prefetch / latency, zero transfer "
        "time); with the measured GET time it is the raw figure's bracket above"
    )
    for inflight, mib_s, busy in run.ceiling:
        hot_median = median([h.seconds for h in run.hots])
        print(
            f"(b) store ceiling, {inflight} GETs in flight straight to {run.store} (no proxy, no "
            f"broker): {mib_s:.0f} MiB/s = {mib_s / (total / MiB / hot_median):.2f}x the median "
            f"hot read; {run.store} busy {busy:.0%} of a core"
        )
    runs = [(f"round {i + 1}", c) for i, c in enumerate(run.colds)]
    seconds = [(f"round {i + 1}, second pass", c) for i, c in enumerate(run.second_passes)]
    for i, (name, cr) in enumerate([*runs, ("baseline", run.base), *seconds]):
        if cr is None:
            continue
        # the round whose hot read is printed beside it (none beside the baseline)
        r = i // modes if i <= len(runs) else i - len(runs) - 1
        if name == "baseline":
            print(f"    cold, no cache, no prefetch: {rate(cr.seconds)}")
        gets = {k: v / remote_gib for k, v in cr.gets.items()}
        print(
            f"(c) {name}: GETs per GiB remote: {gets['log']:.0f} chunk ({cr.gets['log']} "
            f"for {chunk_target / 1.05:.0f} chunks, target <= {chunk_target:.0f}), "
            f"{gets['indexes']:.1f} index, {gets['manifest']:.1f} manifest"
        )
        print(
            f"(d) {name}: broker RSS {cr.rss_before / MiB:.0f} MiB before, peak "
            f"{cr.rss_peak / MiB:.0f} MiB (+{(cr.rss_peak - cr.rss_before) / MiB:.0f}); broker CPU "
            f"{cr.cpu_s / (total / GiB):.2f} s per GiB read "
            f"({cr.kernel_s / (total / GiB):.2f} s in the kernel), "
            f"{cr.minor_faults / (total / GiB):,.0f} minor page faults, "
            f"{cr.switches / (total / GiB):,.0f} context switches per GiB; "
            f"{cr.fetches / (total / GiB):,.0f} Fetch requests per GiB, "
            f"{cr.cpu_s / max(cr.fetches, 1) * 1000:.2f} ms of broker CPU and "
            f"{cr.fetch_s / max(cr.fetches, 1) * 1000:.2f} ms in the broker each, "
            f"{cr.ready_reads / max(cr.remote_reads, 1):.0%} of remote reads answered on the loop, "
            f"{cr.expires:.0f} given up on after remote.fetch.max.wait.ms "
            f"({cr.taken_over:.0f} taken over by the next Fetch), "
            f"{cr.get_range_s / cr.seconds:.1f} ranged GETs in flight on average (the "
            f"ceiling: {args.ceiling_inflight})"
            + (
                f" (hot: {run.hot_fetches[r] / (total / GiB):,.0f} per GiB, "
                f"{run.hot_cpu[r] / max(run.hot_fetches[r], 1) * 1000:.2f} ms each, "
                f"{run.hot_kernel[r] / (total / GiB):.2f} s per GiB in the kernel)"
                if r < len(run.hot_fetches)
                else ""
            )
        )
        ranked = sorted(cr.by_thread.items(), key=lambda kv: -kv[1])
        print(
            f"(d) {name}: broker CPU per GiB by thread: "
            + ", ".join(f"{k} {v / (total / GiB):.2f}" for k, v in ranked if v > 0.005)
        )

    if run.second_passes:
        pairs = [
            (c.cpu_s / (total / GiB), run.hot_cpu[r] / (total / GiB))
            for r, c in enumerate(run.second_passes)
        ]
        speeds = [
            (rate(c.seconds).strip(), versus_ceiling(run, r, c.seconds, total, args.transform))
            for r, c in enumerate(run.second_passes)
        ]
        print(
            "(b) second pass: cold "
            + ", ".join(f"{mib_s}, {v:.2f}x the ceiling" for mib_s, v in speeds)
            + f"; median {median([v for _, v in speeds]):.2f}x"
        )
        print(
            "(d) second pass (no restart, GET buffers touched): broker CPU per GiB cold "
            + ", ".join(f"{c:.2f} s (hot {h:.2f}, {c / max(h, 1e-9):.1f}x)" for c, h in pairs)
            + f"; median {median([c for c, _ in pairs]):.2f} s (target <= 1.0 s, <= 4x hot)"
        )


def ceiling_seconds(run: StoreRun, r: int) -> float:
    """Round ``r``'s ceiling: the mean time of the raw GETs before and after its cold read."""
    return (run.raws_before[r].seconds + run.raws[r].seconds) / 2


def versus_ceiling(run: StoreRun, r: int, cold_s: float, total: int, transform: str) -> float:
    """Round ``r``'s cold read of ``cold_s`` seconds against its ceiling. The ceiling GETs the
    same objects the cold read does: its time over the cold read's, discounted (without
    transforms) by the part of the topic that is local; with transforms the stored bytes
    are not the payload, and only the times compare."""
    ceiling_s = ceiling_seconds(run, r)
    remote_share = run.remote_bytes / total if transform == "none" else 1.0
    return ceiling_s / cold_s * remote_share


def print_windows(cold: ColdRead, chunk_mib: int, rows: int = 24) -> None:
    """The read-ahead window against time during a cold read (an ASCII plot): the mean
    window of the open streams, the streams, the bytes held against the budget, and the
    share of the interval readers spent waiting for a chunk."""
    samples = cold.windows
    if len(samples) < 2:
        return
    step = max(1, len(samples) // rows)
    print("    t (s) | streams | mean window (MiB) | held (MiB) | reader wait")
    previous = samples[0]
    for i in range(step, len(samples), step):
        t, values = samples[i]
        dt = t - previous[0]
        waited = values.get("wait", 0.0) - previous[1].get("wait", 0.0)
        previous = samples[i]
        streams = values.get("streams", 0.0)
        mean = values.get("window", 0.0) / streams / MiB if streams else 0.0
        bar = "#" * round(mean / chunk_mib)
        print(
            f"    {t:5.1f} | {streams:7.0f} | {mean:7.1f} {bar:<32} | "
            f"{values.get('held', 0.0) / MiB:10.1f} | {waited / dt if dt else 0.0:5.0%}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    default_mib = int(os.environ.get("TIERLOG_BENCH_COLD_MIB", "512"))
    parser.add_argument("--mib", type=int, default=default_mib, help="volume per topic")
    parser.add_argument("--store", default="s3rver", help="comma-separated: s3rver, moto")
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions per topic (the volume is spread over them; each has its own read-ahead)",
    )
    parser.add_argument(
        "--kcat-fetch-wait-ms",
        type=int,
        default=10,
        help="kcat fetch.wait.max.ms: how long its final Fetch at the end of the log waits",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--chunk-mib", type=int, default=4)
    parser.add_argument(
        "--batch-kib", type=int, default=1024, help="the producer's batch.size, in KiB"
    )
    parser.add_argument(
        "--prefetch-mib", type=int, default=128, help="per-stream read-ahead cap (adaptive below)"
    )
    parser.add_argument("--budget-mib", type=int, default=256, help="broker-wide read-ahead budget")
    parser.add_argument("--cache-mib", type=int, default=256, help="disk chunk cache size")
    parser.add_argument(
        "--cache-class",
        default="disk",
        choices=["disk", "memory", "none"],
        help="chunk cache (the issue's benchmark: disk)",
    )
    parser.add_argument("--baseline", action="store_true", help="also read with no cache/prefetch")
    parser.add_argument(
        "--consumers",
        default="one",
        help="comma-separated: one (one kcat reads every partition), each (a kcat per partition)",
    )
    parser.add_argument(
        "--ceiling-inflight",
        type=int,
        default=32,
        help="GETs in flight of the raw read through the proxy (the cold read's ceiling)",
    )
    parser.add_argument(
        "--waste", action="store_true", help="also stop a consumer half-way, count wasted bytes"
    )
    parser.add_argument(
        "--first-byte", type=int, default=0, help="first-byte runs on untouched segments (20)"
    )
    parser.add_argument("--window-table", action="store_true", help="print window vs time")
    parser.add_argument(
        "--pretouch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fetch.buffers.pretouch.enabled: the GET buffer pool made resident at each "
        "start (--no-pretouch: the first cold read after a start pays its page faults)",
    )
    parser.add_argument(
        "--second-pass",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="each round, then read a second cold topic of the same volume without a "
        "restart: the broker CPU of a broker whose GET buffers are already touched (the "
        "first cold read after a start pays their page faults, once)",
    )
    parser.add_argument(
        "--transform", default="none", choices=["none", "zstd", "zstd+aes"], help="chunk transforms"
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="also GET every chunk straight from the store at 4-32 in flight (its ceiling here)",
    )
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy raw profile (perf with BENCH_PERF=1) of the first cold read, and with "
        "--second-pass of the first second pass too, beside it with the suffix .second; "
        "py-spy samples BENCH_SPY_RATE per second, with BENCH_NATIVE=1 native frames too, "
        "with BENCH_GIL=1 only the threads holding the GIL",
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config key for every broker of the run (repeatable), as tierlog "
        "serve --override takes it",
    )
    parser.add_argument(
        "--split-cores",
        action="store_true",
        help="the S3 server and the proxy on the last CPU, the broker, kcat and the ceiling's "
        "GETs on the others (the store is not on the broker's machine in production)",
    )
    args = parser.parse_args(argv)
    if args.split_cores:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            parser.error("--split-cores needs two CPUs or more")
        S3Server.cpus = {cpus[-1]}
        # before any thread starts: every thread and process started from here inherits it
        os.sched_setaffinity(0, set(cpus[:-1]))
    stores = [s.strip() for s in args.store.split(",") if s.strip()]
    unknown = [s for s in stores if s not in STORES]
    if unknown or not stores:
        parser.error(f"--store: unknown {unknown}; choose from {sorted(STORES)}")
    for name in stores:
        report(run_store(name, args), args)
        sys.stdout.flush()
    return 0


def remote_logs(backend: ObjectBackend, topic: str) -> list[tuple[str, int]]:
    """(key, size) of every ``.log`` object of ``topic``, in key order."""
    return sorted(
        (k, n)
        for k, n in backend.list_objects("tiered/")
        if k.startswith(f"tiered/{topic}-") and k.endswith(".log")
    )


if __name__ == "__main__":
    sys.exit(main())
