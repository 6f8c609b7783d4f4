"""The tiering views of the CLI, run as a real ``tierlog`` process against the broker."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from tests.helpers.poll import wait_until
from tests.helpers.wire import EARLIEST_LOCAL
from tests.tiered.e2e.e2e_helpers import N, TieredBroker, recipe, segments_of


def _tierlog(*args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "tierlog", *args], capture_output=True, timeout=60, check=True
    ).stdout
    return json.loads(out)


def test_describe_and_remote_segments_show_the_tiered_state(tiered: TieredBroker) -> None:
    topic = "cli-view"
    tiered.create_topic(topic, 2, recipe())
    t0 = int(time.time() * 1000)
    tiered.produce(topic, range(3 * N + 1), timestamp_of=lambda i: t0 + i)
    tiered.produce(topic, range(N + 1), partition=1, timestamp_of=lambda i: t0 + i)
    wait_until(
        lambda: (
            tiered.list_offsets(topic, 0, EARLIEST_LOCAL)[1] == 3 * N
            and tiered.list_offsets(topic, 1, EARLIEST_LOCAL)[1] == N
        ),
        30,
        what="both partitions tiered",
    )
    tiered.delete_records(topic, 0, N)
    tiered.wait_segs(topic, "DELETE", segments_of(1))

    d = _tierlog(
        "topics", "describe", "--bootstrap-server", tiered.bootstrap, "--topic", topic, "--json"
    )
    parts = {p["partition"]: p for p in d["partitions"]}
    assert parts[0]["log_start_offset"] == N
    assert parts[0]["local_log_start_offset"] == 3 * N
    assert parts[0]["latest_tiered_offset"] == 3 * N - 1
    assert parts[1]["local_log_start_offset"] == N
    assert parts[1]["latest_tiered_offset"] == N - 1

    rows = _tierlog("remote", "segments", topic, "--bootstrap-server", tiered.bootstrap, "--json")
    copies = {(e.partition, e.start_offset): e for e in tiered.events(topic, "COPY")}
    expected = [(0, s.start, s.end) for s in segments_of(3)[1:]] + [(1, 0, N - 1)]
    assert [(r["partition"], r["start_offset"], r["end_offset"]) for r in rows] == expected
    for r in rows:
        event = copies[(r["partition"], r["start_offset"])]
        assert r["segment_id"] == event.segment_id
        assert r["state"] == "COPY_SEGMENT_FINISHED"
        assert r["leader_epochs"] == [[0, r["start_offset"]]]
        assert r["max_timestamp_ms"] == t0 + r["end_offset"]
        assert r["broker_id"] == 0
        assert r["size_bytes"] > N * 64

    one = _tierlog(
        "remote",
        "segments",
        topic,
        "--partition",
        "1",
        "--bootstrap-server",
        tiered.bootstrap,
        "--json",
    )
    assert one == [r for r in rows if r["partition"] == 1]
