"""Driving ``tests.helpers.eos_copier`` through crashes and judging its output, shared by the
single-node and the three-broker exactly-once tests.

* ``Copier(bootstrap, source, sink, total, partitions)``: owns the copier process. A copier
  that exits non-zero (fenced, or an error it cannot abort), or that is past the deadline it
  published for its next step (killed then), is replaced by a new one whose InitProducerId
  fences any zombie; ``revive()`` does that and ``restarts`` counts it.
  ``wait_finished`` waits (reviving) until a copier exits 0; ``close`` kills a live one.
  Its output (librdkafka's log of the crashes) goes to the test's stderr, which pytest
  captures: a pipe nobody reads would block the copier once full.
* ``produce_input(bootstrap, topic, start, count, partitions)``: ``count`` records
  ``b"<i>"`` from ``start`` on, round-robin over the partitions, idempotent and acks=all.
* ``sink_end(bootstrap, sink, partitions)`` / ``copied_past(bootstrap, copier, mark)``: the
  sink's total high watermark, and whether the copier has written past ``mark`` (reviving a
  copier that died), so that a crash is injected only once the copier made progress.
* ``KILLS``: how many crashes a run injects.
* ``PROGRESS_S``: the deadline for ``copied_past`` after a crash.
* ``exactly_once_report(out, total)``: what the output lacks and what it holds twice,
  empty when each ``b"out-<i>"`` is there exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

import confluent_kafka as ck

from tests.helpers.eos_copier import STALL_S
from tests.helpers.poll import wait_until

#: How long a copier may take to write past a crash: a hung one is ended by its watchdog
#: (``STALL_S``), and its successor's InitProducerId waits for the abort of the transaction it
#: fences (up to ``transaction.timeout.ms``).
PROGRESS_S = STALL_S + 75
#: What a copier has before its first published deadline: start-up and InitProducerId.
SPAWN_ALLOWANCE_S = 90

#: Crashes per exactly-once run: 5 in ``make test``, 50 under ``TIERLOG_SOAK=1``.
KILLS = 50 if os.environ.get("TIERLOG_SOAK", "") not in ("", "0") else 5


class Copier:
    def __init__(self, bootstrap: str, source: str, sink: str, total: int, partitions: int):
        self._dir = tempfile.TemporaryDirectory(prefix="eos-copier-")
        self._deadline_file = os.path.join(self._dir.name, "deadline")
        self._args = [bootstrap, source, sink, str(total), str(partitions), self._deadline_file]
        self.sink = sink
        self.partitions = partitions
        self.restarts = 0
        self._proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self._deadline_file, "w") as f:
            f.write(f"{time.time() + SPAWN_ALLOWANCE_S:.3f}")
        return subprocess.Popen([sys.executable, "-m", "tests.helpers.eos_copier", *self._args])

    def _past_deadline(self) -> bool:
        try:
            with open(self._deadline_file) as f:
                deadline = float(f.read())
        except (OSError, ValueError):  # read while the copier rewrites it: judged next time
            return False
        return time.time() > deadline

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    @property
    def finished(self) -> bool:
        return self._proc.poll() == 0

    def revive(self) -> None:
        """A copier that exited non-zero, or hangs, is replaced (as an application's supervisor
        would)."""
        if self._proc.poll() is None and self._past_deadline():
            print("copier: past its step's deadline: killed", file=sys.stderr, flush=True)
            self._proc.kill()
            self._proc.wait()
        code = self._proc.poll()
        if code is not None and code != 0:
            self._proc = self._spawn()
            self.restarts += 1

    def _done(self) -> bool:
        self.revive()
        return self.finished

    def wait_finished(self, timeout_s: float) -> None:
        wait_until(self._done, timeout_s=timeout_s, interval_s=0.2, what="the copier to finish")

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._dir.cleanup()


def produce_input(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    p = ck.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.timeout.ms": 60000}
    )
    failed: list[str] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for i in range(start, start + count):
        p.produce(topic, b"%d" % i, partition=i % partitions, on_delivery=done)
        p.poll(0)
    assert p.flush(90) == 0 and not failed, failed[:3]


def exactly_once_report(out: list[bytes], total: int) -> list[str]:
    counts = Counter(out)
    duplicated = sorted(v for v, n in counts.items() if n > 1)
    lost = sorted({b"out-%d" % i for i in range(total)} - set(counts))
    extra = sorted(set(counts) - {b"out-%d" % i for i in range(total)})
    report = []
    if lost:
        report.append(f"{len(lost)} lost, e.g. {lost[:5]}")
    if duplicated:
        report.append(f"{len(duplicated)} duplicated, e.g. {duplicated[:5]}")
    if extra:
        report.append(f"{len(extra)} never sent, e.g. {extra[:5]}")
    return report


def sink_end(bootstrap: str, sink: str, partitions: int) -> int | None:
    """The sink's total high watermark (every transaction's records, committed or not), or
    None while a leader cannot answer. A new client each time: one kept across the kills
    could ask a leader from stale metadata."""
    probe = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-probe"})
    try:
        return sum(
            probe.get_watermark_offsets(ck.TopicPartition(sink, p), timeout=5)[1]
            for p in range(partitions)
        )
    except ck.KafkaException:
        return None
    finally:
        probe.close()


def copied_past(bootstrap: str, copier: Copier, mark: int) -> bool:
    copier.revive()
    end = sink_end(bootstrap, copier.sink, copier.partitions)
    return end is not None and end > mark
