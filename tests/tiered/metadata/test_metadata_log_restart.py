"""The RLMM over the real log engine, killed with SIGKILL and restarted: the cache must be
identical after snapshot + tail replay and after a full replay."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tiered.metadata.log_topic_io import LogManagerMetadataTopicIO
from tests.tiered.metadata.rlmm_harness import TIPS, make_rlmm, state, wait_until
from tierlog.log import LogConfig, LogManager
from tierlog.tiered.api import TopicIdPartition
from tierlog.tiered.metadata import (
    PartitionSnapshot,
    RemoteLogMetadataTopicPartitioner,
    TopicBasedRemoteLogMetadataManager,
    deserialize,
)
from tierlog.tiered.metadata.snapshot_file import read_snapshot

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def killed_broker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("rlmm-kill")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.tiered.metadata.rlmm_child", str(data)], cwd=ROOT
    )
    try:
        wait_until(
            lambda: (data / "expected.bin").exists() or proc.poll() is not None,
            timeout_s=120,
            what="child to finish its mutations",
        )
        assert proc.poll() is None, f"child exited early with {proc.returncode}"
    finally:
        proc.kill()  # SIGKILL
        proc.wait(30)
    return data


def expected_state(data: Path) -> dict[TopicIdPartition, PartitionSnapshot]:
    raw = (data / "expected.bin").read_bytes()
    out: dict[TopicIdPartition, PartitionSnapshot] = {}
    pos = 0
    while pos < len(raw):
        (n,) = struct.unpack_from(">I", raw, pos)
        rec = deserialize(raw[pos + 4 : pos + 4 + n])
        assert isinstance(rec, PartitionSnapshot)
        out[rec.topic_id_partition] = rec
        pos += 4 + n
    return out


@pytest.fixture
def restarted_logs(killed_broker_dir: Path) -> Iterator[LogManager]:
    logs = LogManager([killed_broker_dir / "logs"], LogConfig())
    logs.load()
    yield logs
    logs.shutdown()


def restart(
    logs: LogManager, snaps: Path | None, extra: dict[str, str] | None = None
) -> TopicBasedRemoteLogMetadataManager:
    rlmm = make_rlmm(LogManagerMetadataTopicIO(logs), snaps, extra)
    rlmm.on_partition_leadership_changes(set(TIPS), set())
    wait_until(lambda: all(rlmm.is_ready(t) for t in TIPS), what="replay after restart")
    return rlmm


def test_killed_broker_left_snapshots_and_a_tail(
    killed_broker_dir: Path, restarted_logs: LogManager
) -> None:
    io = LogManagerMetadataTopicIO(restarted_logs)
    part = RemoteLogMetadataTopicPartitioner(5)
    tails = []
    for mp in sorted({part.metadata_partition(t) for t in TIPS}):
        snap = read_snapshot(killed_broker_dir / "snaps", mp)
        assert snap, f"metadata partition {mp} has a snapshot"
        tails.append(io.end_offset(mp) - min(s.covered_offset for s in snap.values()))
    assert any(t > 0 for t in tails), "some events happened after the last snapshot"


def test_cache_identical_after_snapshot_plus_tail(
    killed_broker_dir: Path, restarted_logs: LogManager, tmp_path: Path
) -> None:
    snaps = tmp_path / "snaps"  # a copy: this manager's own snapshots must not leak out
    shutil.copytree(killed_broker_dir / "snaps", snaps)
    rlmm = restart(restarted_logs, snaps)
    try:
        assert state(rlmm) == expected_state(killed_broker_dir)
    finally:
        rlmm.close()


def test_cache_identical_after_full_replay(
    killed_broker_dir: Path, restarted_logs: LogManager
) -> None:
    rlmm = restart(restarted_logs, None)
    try:
        assert state(rlmm) == expected_state(killed_broker_dir)
    finally:
        rlmm.close()
