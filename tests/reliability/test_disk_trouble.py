"""Scenario 3: disk trouble under a real ``tierlog serve``.

Damage is done to the files of a stopped (SIGKILLed or cleanly stopped) broker, then the
broker is restarted on them. Every case checks the same promise: what is still valid is
served, exactly once and in order (offset i holds value i), nothing invalid is served, and
the partition takes new writes afterwards. The full-disk case runs the broker on an 8 MiB
tmpfs and checks that writes are refused with KAFKA_STORAGE_ERROR while acknowledged data
stays intact, and that writes resume once space is freed.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rel_helpers import (
    FAST_START,
    index_of,
    must_create_topic,
    record,
    scale,
    value_of,
    wire_fetch,
    wire_produce,
)

from helpers.broker import BrokerProcess
from tierlog.client import WireConnection
from tierlog.protocol.errors import ErrorCode

BATCH = 10
TOPIC = "disk"


def _produce(b: BrokerProcess, start: int, count: int, topic: str = TOPIC) -> None:
    """``count`` records in batches of ``BATCH``, acks=all; offset i holds value_of(i)."""
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        for i in range(start, start + count, BATCH):
            err, base, msg = wire_produce(c, topic, [value_of(j) for j in range(i, i + BATCH)])
            assert err == 0 and base == i, (err, base, msg)


def _read_all(b: BrokerProcess, topic: str = TOPIC) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        offset = 0
        while True:
            err, recs = wire_fetch(c, topic, offset)
            assert err == 0, ErrorCode(err)
            if not recs:
                return out
            out.extend(r for r in recs if r[0] >= offset)
            offset = recs[-1][0] + 1


def _assert_prefix(recs: list[tuple[int, bytes | None]], at_least: int, at_most: int) -> int:
    """The records are exactly 0..n-1 with value i at offset i; returns n."""
    n = len(recs)
    assert at_least <= n <= at_most, (n, at_least, at_most)
    for i, (offset, value) in enumerate(recs):
        assert offset == i and value is not None and index_of(value) == i, (i, offset, value)
    return n


def _segments(b: BrokerProcess, topic: str = TOPIC) -> list[Path]:
    return sorted((b.log_dir / f"{topic}-0").glob("*.log"), key=lambda p: int(p.stem))


def _timed_start(b: BrokerProcess) -> float:
    t0 = time.monotonic()
    b.start()
    return time.monotonic() - t0


@pytest.fixture
def disk_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """Small segments so there are sealed segments with indexes, an entry per batch."""
    b = broker_factory(
        {**FAST_START, "log.segment.bytes": str(64 * 1024), "log.index.interval.bytes": "1"}
    )
    must_create_topic(b.bootstrap, TOPIC)
    return b


def test_truncated_active_segment_tail(disk_broker: BrokerProcess) -> None:
    """A crash that left half a batch at the end: recovery drops only the partial batch."""
    b = disk_broker
    n = scale(2000, 20000)
    cycles = scale(3, 20)
    rng = random.Random()
    total = n
    _produce(b, 0, n)
    lost_partial = 0
    recover_s: list[float] = []
    for _ in range(cycles):
        b.kill()
        active = _segments(b)[-1]
        size = active.stat().st_size
        cut = rng.randrange(1, 120)  # a record batch of 10 values is ~1.2 KiB
        os.truncate(active, size - cut)
        recover_s.append(_timed_start(b))
        got = _assert_prefix(_read_all(b), total - BATCH, total - 1)
        lost_partial += total - got
        assert got % BATCH == 0  # whole batches only
        total = got
        _produce(b, total, 100)  # the partition takes new writes at the truncation point
        total += 100
    assert _assert_prefix(_read_all(b), total, total) == total
    assert "Traceback" not in b.stderr, b.stderr[-3000:]
    record(
        "disk.truncated_tail",
        injections=cycles,
        records_acknowledged=n + 100 * cycles,
        records_cut_off_by_injection=lost_partial,
        records_lost_otherwise=0,
        recover_s_max=round(max(recover_s), 2),
    )


def test_corrupt_active_segment_tail(disk_broker: BrokerProcess) -> None:
    """A flipped byte inside the last batch (CRC mismatch): recovery truncates before it and
    serves nothing from it."""
    b = disk_broker
    n = scale(1000, 10000)
    _produce(b, 0, n)
    b.kill()
    active = _segments(b)[-1]
    data = bytearray(active.read_bytes())
    data[len(data) - 200] ^= 0x40  # inside the records of the last batch (~1.2 KiB)
    active.write_bytes(bytes(data))
    recover = _timed_start(b)
    got = _assert_prefix(_read_all(b), n - BATCH, n - BATCH)
    _produce(b, got, 50)
    _assert_prefix(_read_all(b), got + 50, got + 50)
    assert "Traceback" not in b.stderr, b.stderr[-3000:]
    record(
        "disk.corrupt_tail",
        injections=1,
        records_acknowledged=n + 50,
        records_in_corrupted_batch=BATCH,
        records_lost_otherwise=0,
        recover_s=round(recover, 2),
    )


def _check_reads_at(b: BrokerProcess, offsets: list[int]) -> None:
    """A Fetch at each offset returns the batch holding it (index lookups are right)."""
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        for o in offsets:
            err, recs = wire_fetch(c, TOPIC, o, max_bytes=1)
            assert err == 0, (o, ErrorCode(err))
            assert recs and recs[0][0] <= o <= recs[-1][0], (o, recs[:1], recs[-1:])
            for offset, value in recs:
                assert value is not None and index_of(value) == offset


@pytest.mark.parametrize(
    ("how", "shutdown"), [("garbage", "kill"), ("truncated", "clean"), ("zeroed", "kill")]
)
def test_corrupt_indexes(disk_broker: BrokerProcess, how: str, shutdown: str) -> None:
    """Every offset and time index damaged (random bytes, a length that is not a whole
    number of entries, or zeros) after a crash or a clean shutdown: reads at any offset
    still return the right batch, and the log takes writes."""
    b = disk_broker
    n = scale(1500, 6000)
    _produce(b, 0, n)
    if shutdown == "kill":
        b.kill()
    else:
        assert b.stop() == 0
    rng = random.Random()
    damaged = 0
    for idx in sorted((b.log_dir / f"{TOPIC}-0").glob("*.*index")):
        if idx.suffix not in (".index", ".timeindex"):
            continue
        size = idx.stat().st_size
        if size == 0:
            continue
        if how == "garbage":
            idx.write_bytes(rng.randbytes(size))
        elif how == "truncated":
            os.truncate(idx, size - 3)
        else:
            idx.write_bytes(b"\0" * size)
        damaged += 1
    assert damaged >= 4
    recover = _timed_start(b)
    _check_reads_at(b, [*sorted(rng.sample(range(n), 40)), 0, n - 1])
    _assert_prefix(_read_all(b), n, n)
    _produce(b, n, 50)
    _assert_prefix(_read_all(b), n + 50, n + 50)
    record(
        f"disk.corrupt_index.{how}.{shutdown}",
        injections=damaged,
        records_acknowledged=n + 50,
        records_lost=0,
        recover_s=round(recover, 2),
    )


#: Every checkpoint-like file of the log engine, damaged together.
CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "disk-0/leader-epoch-checkpoint",
    "disk-0/*.snapshot",
)


def test_corrupt_checkpoints(disk_broker: BrokerProcess) -> None:
    """Damaged checkpoints and producer snapshots (not even UTF-8): the broker starts,
    rebuilds what it needs from the segments, and serves every acknowledged record. (A
    non-UTF-8 checkpoint used to stop the broker at start-up with UnicodeDecodeError.)"""
    b = disk_broker
    n = scale(1000, 5000)
    _produce(b, 0, n)
    assert b.stop() == 0
    damaged = []
    for pattern in CHECKPOINTS:
        files = [p for p in b.log_dir.glob(pattern) if p.is_file()]
        assert files, f"nothing matches {pattern}: {sorted(os.listdir(b.log_dir))}"
        for f in files:
            f.write_bytes(b"\x07garbage\nnot a checkpoint\n\xff\xfe" + os.urandom(16))
            damaged.append(f.name)
    recover = _timed_start(b)
    _assert_prefix(_read_all(b), n, n)
    _produce(b, n, 50)
    _assert_prefix(_read_all(b), n + 50, n + 50)
    assert "ignoring malformed" in b.stderr
    record(
        "disk.corrupt_checkpoints",
        injections=len(damaged),
        files=damaged,
        records_acknowledged=n + 50,
        records_lost=0,
        recover_s=round(recover, 2),
    )


# ---- full disk ----------------------------------------------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_refuses_writes_and_recovers(
    broker_factory: Callable[..., BrokerProcess], small_tmpfs: Path
) -> None:
    """Produce into an 8 MiB tmpfs until it is full: the broker answers KAFKA_STORAGE_ERROR
    (never a crash, never a torn batch), keeps serving reads of everything acknowledged, and
    takes writes again once space is freed (and after a restart)."""
    data = small_tmpfs / "data"
    b = broker_factory(
        {
            **FAST_START,
            "log.dirs": str(data),
            "log.segment.bytes": str(1024 * 1024),
            "log.index.size.max.bytes": str(64 * 1024),
            "remote.log.storage.system.enable": "false",
        }
    )
    must_create_topic(b.bootstrap, TOPIC)
    ballast = small_tmpfs / "ballast"
    ballast.write_bytes(b"\0" * (1024 * 1024))  # removed later to free space
    acked = 0
    refused: tuple[int, str | None] | None = None
    t_full = 0.0
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        while refused is None:
            values = [value_of(j, 1000) for j in range(acked, acked + BATCH)]
            err, base, msg = wire_produce(c, TOPIC, values)
            if err == 0:
                assert base == acked
                acked += BATCH
            else:
                refused = (err, msg)
                t_full = time.monotonic()
            assert acked < 20_000, "the 8 MiB disk never filled up"
        assert refused[0] == ErrorCode.KAFKA_STORAGE_ERROR, (ErrorCode(refused[0]), refused[1])
        # more attempts are refused the same way, and nothing half-written is left behind
        for _ in range(5):
            err, _, msg = wire_produce(c, TOPIC, [value_of(acked, 1000)] * BATCH)
            assert err == ErrorCode.KAFKA_STORAGE_ERROR, (ErrorCode(err), msg)
        assert b.running, b.stderr[-3000:]
        _assert_prefix(_read_all(b), acked, acked)
        ballast.unlink()
        err, base, msg = wire_produce(
            c, TOPIC, [value_of(j, 1000) for j in range(acked, acked + BATCH)]
        )
        assert (err, base) == (0, acked), (ErrorCode(err), base, msg)
        acked += BATCH
        recovered_s = time.monotonic() - t_full
    _assert_prefix(_read_all(b), acked, acked)
    b.kill()
    recover = _timed_start(b)
    _assert_prefix(_read_all(b), acked, acked)
    assert "Traceback" not in b.stderr, b.stderr[-3000:]
    record(
        "disk.full",
        disk_mb=8,
        records_acknowledged=acked,
        records_lost=0,
        refused_with=ErrorCode(refused[0]).name,
        refusal_message=refused[1],
        writes_resumed_after_free_s=round(recovered_s, 2),
        restart_recover_s=round(recover, 2),
    )
