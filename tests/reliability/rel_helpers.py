"""Shared parts of the reliability suite: mode sizing, resource sampling from /proc, figures.

Sizing: every test runs in both modes and picks its size with ``scale(short, soak)``; the
short variant runs in ``make test``, the long one with ``TIERLOG_SOAK=1`` (``make soak``).
Nothing is skipped in either mode.

Figures: each test appends one JSON line per scenario to ``results-<mode>.jsonl`` in
``$TIERLOG_RELIABILITY_RESULTS`` (default ``/tmp/tierlog-reliability``), which is where the
tables of ``docs/reliability.md`` come from. The file is generated data and never committed.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition

from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey

T = TypeVar("T")

SOAK = os.environ.get("TIERLOG_SOAK", "") not in ("", "0")
MODE = "soak" if SOAK else "short"
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


#: Broker overrides that keep start-up cheap (internal topics with one partition each).
FAST_START: dict[str, str] = {
    "offsets.topic.num.partitions": "1",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
}


def scale(short: T, soak: T) -> T:
    return soak if SOAK else short


def results_path() -> Path:
    base = Path(os.environ.get("TIERLOG_RELIABILITY_RESULTS", "/tmp/tierlog-reliability"))
    base.mkdir(parents=True, exist_ok=True)
    return base / f"results-{MODE}.jsonl"


def record(scenario: str, **figures: Any) -> None:
    """Append the figures of one run of ``scenario`` (for docs/reliability.md)."""
    line = {"scenario": scenario, "mode": MODE, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    line.update(figures)
    with results_path().open("a") as f:
        f.write(json.dumps(line, default=str) + "\n")


# ---- /proc ----------------------------------------------------------------------------------
def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class ResourceTrace:
    """RSS/CPU samples of one process: (monotonic seconds, rss bytes, cpu seconds)."""

    samples: list[tuple[float, int, float]] = field(default_factory=list)

    @property
    def peak_rss(self) -> int:
        return max((s[1] for s in self.samples), default=0)

    def cpu_percent(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, _, c0), (t1, _, c1) = self.samples[0], self.samples[-1]
        return 100.0 * (c1 - c0) / max(t1 - t0, 1e-9)

    def rss_slope_mb_per_min(self, skip_fraction: float = 0.3) -> float:
        """Least-squares slope of RSS over the run, warm-up excluded: growth that does not
        level off shows up here."""
        pts = self.samples[int(len(self.samples) * skip_fraction) :]
        if len(pts) < 3:
            return 0.0
        xs = [p[0] for p in pts]
        ys = [p[1] / 2**20 for p in pts]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        if den == 0:
            return 0.0
        return 60.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


@contextmanager
def sample_resources(pid: int, interval_s: float = 0.25) -> Iterator[ResourceTrace]:
    """Sample ``pid`` on a background thread for the duration of the block."""
    trace = ResourceTrace()
    stop = threading.Event()

    def run() -> None:
        while True:
            try:
                trace.samples.append((time.monotonic(), rss_bytes(pid), cpu_seconds(pid)))
            except (FileNotFoundError, ProcessLookupError):
                return
            if stop.wait(interval_s):
                return

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield trace
    finally:
        stop.set()
        t.join(5)
        try:
            trace.samples.append((time.monotonic(), rss_bytes(pid), cpu_seconds(pid)))
        except (FileNotFoundError, ProcessLookupError):
            pass


# ---- admin and data over the wire -----------------------------------------------------------
def create_topic(
    bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> tuple[int, str | None]:
    """CreateTopics v5; returns (error code, message) instead of asserting, for the tests
    that expect a refusal."""
    with WireConnection.to_bootstrap(bootstrap) as c:
        r = c.call(
            ApiKey.CREATE_TOPICS,
            5,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            timeout=30_000,
            validate_only=False,
        )
    t = r.topics[0]
    return int(t.error_code), t.error_message


def must_create_topic(
    bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    code, msg = create_topic(bootstrap, name, partitions, configs)
    assert code == 0, (name, code, msg)


def value_of(i: int, pad: int = 100) -> bytes:
    return (b"v%09d|" % i).ljust(pad, b".")


def index_of(value: bytes) -> int:
    return int(value[1:10])


def producer(bootstrap: str, **extra: Any) -> Producer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 2,
        "batch.size": 16384,  # below the 64 KiB segments of the tiered scenarios
        "enable.idempotence": False,
        "message.timeout.ms": 30_000,
    }
    conf.update(extra)
    return Producer(conf)


def produce_values(
    bootstrap: str, topic: str, indexes: range, partition: int = 0, pad: int = 100
) -> None:
    p = producer(bootstrap)
    errors: list[Any] = []
    for i in indexes:
        while True:
            try:
                p.produce(
                    topic,
                    value_of(i, pad),
                    partition=partition,
                    on_delivery=lambda e, _m: errors.append(e) if e is not None else None,
                )
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    assert not errors, errors[:3]


def consume_all(
    bootstrap: str, topic: str, partition: int, end_offset: int, timeout_s: float = 60.0
) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in ``[earliest, end_offset)``, read by a real client."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rel-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 8 * 2**20,
        }
    )
    out: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout_s
        next_offset = 0
        while next_offset < end_offset:
            if time.monotonic() > deadline:
                raise AssertionError(f"read only up to {next_offset} of {end_offset} in {topic}")
            for m in c.consume(1000, 0.5):
                err = m.error()
                if err is not None:
                    if err.code() == -191:  # _PARTITION_EOF
                        continue
                    raise AssertionError(f"consume error: {err}")
                offset = m.offset() or 0
                out.append((offset, bytes(m.value() or b"")))
                next_offset = offset + 1
    finally:
        c.close()
    return out


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class GoodClient:
    """A well-behaved producer + consumer pair whose round trip is the throughput probe.

    One round produces ``n`` records of 1 KiB (acks=all) and reads the same ``n`` back;
    ``round`` returns records per second of the whole round trip.
    """

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self._p = producer(bootstrap, **{"linger.ms": 5})
        self._c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"good-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        self._next = 0
        self._c.assign([TopicPartition(topic, 0, 0)])

    def round(self, n: int = 5000, timeout_s: float = 60.0) -> float:
        t0 = time.perf_counter()
        errors: list[Any] = []
        for i in range(n):
            while True:
                try:
                    self._p.produce(
                        self.topic,
                        value_of(self._next + i, 1024),
                        partition=0,
                        on_delivery=lambda e, _m: errors.append(e) if e else None,
                    )
                    break
                except BufferError:
                    self._p.poll(0.01)
        assert self._p.flush(timeout_s) == 0
        assert not errors, errors[:3]
        target = self._next + n
        got = self._next
        deadline = time.monotonic() + timeout_s
        while got < target:
            assert time.monotonic() < deadline, f"good consumer stuck at {got} < {target}"
            for m in self._c.consume(2000, 0.2):
                if m.error() is None:
                    got = max(got, (m.offset() or 0) + 1)
        self._next = target
        return n / (time.perf_counter() - t0)

    def close(self) -> None:
        self._p.flush(5)
        self._c.close()


# ---- raw Produce / Fetch (exact error codes, no client retries) ------------------------------
def wire_produce(
    c: WireConnection, topic: str, values: list[bytes], partition: int = 0, acks: int = -1
) -> tuple[int, int, str | None]:
    """One Produce v9 request with one batch; returns (error code, base offset, message)."""
    from tierlog.protocol.records import build_batch

    batch = build_batch(values, timestamp=int(time.time() * 1000))
    r = c.call(
        ApiKey.PRODUCE,
        9,
        transactional_id=None,
        acks=acks,
        timeout=30_000,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    )
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset), p.error_message


def wire_fetch(
    c: WireConnection, topic: str, offset: int, partition: int = 0, max_bytes: int = 1 << 20
) -> tuple[int, list[tuple[int, bytes | None]]]:
    """One Fetch v12 of one partition; returns (error code, [(offset, value)])."""
    from tierlog.protocol.records import iter_records, scan_batches

    r = c.call(
        ApiKey.FETCH,
        12,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "partition_max_bytes": max_bytes,
                        "current_leader_epoch": -1,
                        "log_start_offset": -1,
                        "last_fetched_epoch": -1,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    p = r.responses[0].partitions[0]
    records = bytes(p.records or b"")
    out: list[tuple[int, bytes | None]] = []
    for h in scan_batches(records):
        for rec in iter_records(records[h.position : h.end]):
            out.append((rec.offset, rec.value))
    return int(p.error_code), out
