"""Child process for the kill -9 test: a real log engine + RLMM writing metadata.

Usage, from the repository root: ``python -m tests.tiered.metadata.rlmm_child DATA_DIR``.
Writes ``DATA_DIR/expected.bin`` (the state every completed mutation produced) once all its
mutations completed, then idles until it is killed.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from pathlib import Path

from tests.tiered.metadata.log_topic_io import LogManagerMetadataTopicIO
from tests.tiered.metadata.rlmm_harness import TIPS, make_rlmm, populate, state, wait_until
from tierlog.log import LogConfig, LogManager
from tierlog.tiered.metadata import serialize


def main(data_dir: Path) -> None:
    logs = LogManager([data_dir / "logs"], LogConfig())
    logs.load()
    rlmm = make_rlmm(
        LogManagerMetadataTopicIO(logs),
        data_dir / "snaps",
        {
            "remote.log.metadata.snapshot.interval.records": "10",
            "remote.log.metadata.snapshot.interval.ms": "3600000",
        },
    )
    rlmm.on_partition_leadership_changes(set(TIPS), set())
    wait_until(lambda: all(rlmm.is_ready(t) for t in TIPS))
    populate(rlmm, per_partition=7)
    body = b"".join(
        struct.pack(">I", len(rec)) + rec for rec in (serialize(s) for s in state(rlmm).values())
    )
    tmp = data_dir / "expected.tmp"
    tmp.write_bytes(body)
    os.replace(tmp, data_dir / "expected.bin")
    while True:  # wait for SIGKILL; no clean shutdown of the log or the RLMM
        time.sleep(1)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
