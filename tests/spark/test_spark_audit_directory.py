"""The audit over the directory plugin: every check, from its inventory alone.

Spark but no broker: real filesets copied by the plugin, and the metadata rows the job
would read from `__remote_log_metadata` built from the same segment metadata.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from pathlib import Path
from typing import Any

import pytest

from tierlog.spark.jobs import audit
from tierlog.spark.jobs.inventory import Inventory
from tierlog.spark.jobs.metadata import SEGMENT_DDL, partition_row, segment_row
from tierlog.spark.segments import RsmSpec
from tierlog.tiered.api import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

TIP = TopicIdPartition(uuid.uuid4(), "audited", 0)
LOG = b"x" * 64


def _copy(plugin: Any, tmp: Path, start: int) -> RemoteLogSegmentMetadata:
    src = tmp / f"local-{start}"
    src.mkdir()
    for name, data in (("a.log", LOG), ("a.index", b"i" * 8), ("a.timeindex", b"t" * 12)):
        (src / name).write_bytes(data)
    (src / "a.snapshot").write_bytes(b"")
    md = RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP),
        start_offset=start,
        end_offset=start + 9,
        max_timestamp_ms=1,
        broker_id=0,
        event_timestamp_ms=1,
        segment_size_in_bytes=len(LOG),
        custom_metadata=None,
        state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        segment_leader_epochs={0: start},
    )
    plugin.copy_log_segment_data(
        md,
        LogSegmentData(
            log_segment=src / "a.log",
            offset_index=src / "a.index",
            time_index=src / "a.timeindex",
            transaction_index=None,
            producer_snapshot_index=src / "a.snapshot",
            leader_epoch_index=b"0\n1\n0 0\n",
        ),
    )
    return dataclasses.replace(md, state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED)


def _b64(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def test_audit_of_the_directory_plugin(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "remote"
    inventory = Inventory.of(RsmSpec.of("directory", {"dir": str(root)}))
    plugin = inventory.plugin
    intact, truncated, incomplete = (_copy(plugin, tmp_path, n * 10) for n in range(3))
    log_of = {md: root / plugin.required_keys(md)[0] for md in (intact, truncated)}
    log_of[truncated].write_bytes(LOG[:10])
    (root / plugin.required_keys(incomplete)[1]).unlink()
    pdir = log_of[intact].parent
    orphan = pdir / f"{99:020d}-{_b64(uuid.uuid4())}.log"
    orphan.write_bytes(b"left behind")
    stray = pdir / "notes.txt"
    stray.write_bytes(b"not ours")
    foreign = root / f"audited-0-{_b64(uuid.uuid4())}" / f"{0:020d}-{_b64(uuid.uuid4())}.log"
    foreign.parent.mkdir()
    foreign.write_bytes(b"another cluster's")

    segments = (intact, truncated, incomplete)
    rows = [partition_row(TIP)] + [segment_row(plugin, md) for md in segments]
    monkeypatch.setattr(
        audit, "_metadata_rows", lambda s, b, i: s.createDataFrame(rows, SEGMENT_DDL).cache()
    )
    report = audit.run_audit(spark, "unused:0", inventory, grace_ms=1000, now_ms=10**6)

    def rel(p: Path) -> str:
        return p.relative_to(root).as_posix()

    assert {(f.kind, f.key) for f in report.findings} == {
        ("size_mismatch", rel(log_of[truncated])),
        ("missing", plugin.required_keys(incomplete)[1]),
        ("orphan", rel(orphan)),
        ("unrecognised", rel(stray)),
        ("foreign", rel(foreign)),
    }
    (mismatch,) = [f for f in report.findings if f.kind == "size_mismatch"]
    assert (mismatch.size, mismatch.expected_size) == (10, len(LOG))
    assert "segment metadata" in mismatch.detail
    assert report.store == str(root) and report.segments == 3
