"""Deleting orphans: the metadata is read again just before anything is deleted.

No Spark and no broker: a report as the audit job produces it, real files in a directory
plugin's root, and the metadata states as they are at deletion time.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from tierlog.spark.jobs.audit import AuditReport, Finding, delete_orphans
from tierlog.spark.jobs.inventory import Inventory
from tierlog.spark.segments import RsmSpec


def test_stuck_segments_that_moved_on_since_the_audit_keep_their_objects(tmp_path: Path) -> None:
    inventory = Inventory.of(RsmSpec.of("directory", {"dir": str(tmp_path)}))
    part = tmp_path / f"t-0-{uuid.uuid4().hex[:22]}"
    part.mkdir()
    finished_since, still_stuck, no_metadata = (str(uuid.uuid4()) for _ in range(3))
    files = {
        name: part / f"{i:020d}-{name[:22]}.log"
        for i, name in enumerate((finished_since, still_stuck, no_metadata))
    }
    for f in files.values():
        f.write_bytes(b"x" * 10)

    def orphan(segment: str, state: str | None) -> Finding:
        key = files[segment].relative_to(tmp_path).as_posix()
        return Finding(
            "orphan", key, "", "t", 0, None if state is None else segment, 10, None, state
        )

    report = AuditReport(
        "dir",
        3,
        30,
        2,
        [
            orphan(finished_since, "COPY_SEGMENT_STARTED"),  # a slow upload, now finished
            orphan(still_stuck, "DELETE_SEGMENT_STARTED"),
            orphan(no_metadata, None),
        ],
    )
    states = {finished_since: "COPY_SEGMENT_FINISHED", still_stuck: "DELETE_SEGMENT_STARTED"}

    dry = delete_orphans(report, inventory, execute=False, states=lambda: states)
    assert dry["objects"] == 3 and all(f.exists() for f in files.values())

    done = delete_orphans(report, inventory, execute=True, states=lambda: states)
    assert done["deleted"] == 2 and done["skipped_changed_state"] == 1
    assert files[finished_since].exists()
    assert not files[still_stuck].exists() and not files[no_metadata].exists()
