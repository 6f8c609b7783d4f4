"""``__consumer_offsets`` load time after a restart: a group that committed 1,000,000 times
(cleaned) against a group that committed once, measured by the broker itself.

A real ``tierlog serve`` (Kafka's 50 offsets partitions, ``offsets.topic.segment.bytes``
default) gets one commit from group ``once`` through confluent-kafka; its restarts give the
baseline. With the broker stopped, group ``busy`` gets N commits on its offsets partition, one
single-record batch per commit exactly as the coordinator writes them (Kafka's key v1 and
value v3), and the active segment is rolled (what ``segment.ms`` does over a year of
commits; the active segment is never cleaned). The broker is started once on the uncleaned
log (the reference: the whole history is replayed), then the log cleaner (the broker's own
``LogCleaner``, in this process) cleans the partition to its end, and the broker is
restarted again. Each figure is the coordinator's own log line, ``loaded G groups from R
__consumer_offsets records in T ms``; restarts are repeated and the median is reported, with
the broker's whole time to ready beside it.

Target (issue 15): the 1M-commit group's load within 2x of the single-commit group's.

    .venv/bin/python bench/bench_offsets_load.py [--commits 1000000] [--restarts 5]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.broker import BrokerProcess
from tierlog.log import LogConfig, LogManager, TopicPartition
from tierlog.log.cleaner.config import CleanerConfig
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.server.group import OFFSETS_TOPIC, partition_for
from tierlog.server.group.model import TopicPartition as GroupTopicPartition
from tierlog.server.group.schema import CommittedOffset, offset_key, offset_value

PARTITIONS = 50
OVERRIDES = {"log.cleaner.enable": "false", "offsets.topic.num.partitions": str(PARTITIONS)}
LOADED = re.compile(r"loaded (\d+) groups from (\d+) __consumer_offsets records in ([\d.]+) ms")
OFFSETS_LOG = LogConfig(cleanup_policy=("compact",), segment_bytes=104_857_600)


def _last_load(b: BrokerProcess) -> tuple[int, int, float]:
    found = LOADED.findall(b.stderr)
    if not found:
        raise RuntimeError("no load line in the broker log:\n" + b.stderr[-3000:])
    groups, records, ms = found[-1]
    return int(groups), int(records), float(ms)


def _restarts(b: BrokerProcess, n: int) -> tuple[int, int, float, float]:
    """Restart ``n`` times: groups and records loaded, median load ms, median s to ready."""
    loads: list[tuple[int, int, float]] = []
    ready: list[float] = []
    for _ in range(n):
        b.stop()
        started = time.monotonic()
        b.start()
        ready.append(time.monotonic() - started)
        loads.append(_last_load(b))
    groups, records, _ = loads[-1]
    return groups, records, statistics.median(ms for _, _, ms in loads), statistics.median(ready)


def _offsets_bytes(log_dir: Path) -> int:
    return sum(f.stat().st_size for f in log_dir.glob(f"{OFFSETS_TOPIC}-*/*.log") if f.is_file())


def _commit_many(log_dir: Path, group: str, commits: int) -> float:
    """Append ``commits`` single-record commit batches for ``group``; returns seconds."""
    mgr = LogManager([log_dir], LogConfig())
    mgr.load({OFFSETS_TOPIC: OFFSETS_LOG})
    plog = mgr.get_log(TopicPartition(OFFSETS_TOPIC, partition_for(group, PARTITIONS)))
    assert plog is not None
    key = offset_key(group, GroupTopicPartition("events", 0))
    started = time.monotonic()
    for i in range(commits):
        now = int(time.time() * 1000)
        value = offset_value(CommittedOffset(i, 0, "", now))
        plog.append_as_leader(build_batch([SimpleRecord(value, key, now)], timestamp=now), 0, -1)
    plog.roll()
    elapsed = time.monotonic() - started
    mgr.shutdown()
    return elapsed


def _clean(log_dir: Path) -> float:
    mgr = LogManager([log_dir], LogConfig())
    mgr.load({OFFSETS_TOPIC: OFFSETS_LOG})
    cleaner = mgr.start_cleaner(CleanerConfig(enable=False))
    worker = cleaner._new_cleaner()
    started = time.monotonic()
    while cleaner.clean_once(worker):
        pass
    elapsed = time.monotonic() - started
    mgr.shutdown()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=1_000_000)
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--dir", default=None, help="parent of the temp dir (default: $TMPDIR)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-offsets-load-", dir=args.dir))
    b = BrokerProcess(root, OVERRIDES)
    rows: list[str] = []
    try:
        b.start()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("events", 1, 1)])["events"].result(30)
        del admin  # its handle would reconnect through every restart below
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "once"})
        c.commit(offsets=[ck.TopicPartition("events", 0, 1)], asynchronous=False)
        c.close()

        g, r, ms, ready = _restarts(b, args.restarts)
        baseline = ms
        rows.append(
            f"| single-commit group (baseline) | {r:,} | {_offsets_bytes(b.log_dir):,} "
            f"| **{ms:.2f}** | {ready:.2f} |"
        )
        b.stop()
        append_s = _commit_many(b.log_dir, "busy", args.commits)
        size = _offsets_bytes(b.log_dir)
        b.start()
        g, r, ms = _last_load(b)
        rows.append(
            f"| + {args.commits:,}-commit group, uncleaned (1 restart) | {r:,} "
            f"| {size:,} | {ms:.2f} | - |"
        )
        b.stop()
        clean_s = _clean(b.log_dir)
        b.start()
        g, r, ms, ready = _restarts(b, args.restarts)
        ratio = ms / baseline if baseline > 0 else float("inf")
        rows.append(
            f"| + {args.commits:,}-commit group, cleaned | {r:,} "
            f"| {_offsets_bytes(b.log_dir):,} | **{ms:.2f}** | {ready:.2f} |"
        )
        b.stop()
        print(f"commits appended in {append_s:.1f} s; cleaned in {clean_s:.1f} s")
        print(f"groups loaded after cleaning: {g}")
        print()
        print(
            "| scenario | records loaded | offsets log bytes | load ms (median) "
            "| broker ready s (median) |"
        )
        print("|---|---:|---:|---:|---:|")
        for row in rows:
            print(row)
        print()
        verdict = "within" if ratio <= 2.0 else "NOT within"
        print(
            f"cleaned {args.commits:,}-commit load / single-commit load = {ratio:.2f} "
            f"({verdict} 2x)"
        )
    finally:
        b.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
