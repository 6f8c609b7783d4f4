"""Faults at the storage plugin boundary: a failed copy, a failed delete, oversized custom
metadata, and a full remote reader queue.

The broker loads ``tests.tiered.e2e.gated_rsm`` (a directory RSM whose segment reads can be
held), with the repository root on its ``PYTHONPATH``; copy/delete/custom-metadata faults
are armed through the directory RSM's control file. Faults are broker-wide, so each test arms
them only while its own topic is the only one with work to do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.poll import holds_for, wait_until
from tests.helpers.wire import (
    LATEST_TIERED,
    fetch_fields,
    fetch_partition,
    offsets_and_values,
)
from tests.tiered.e2e.e2e_helpers import (
    N,
    Seg,
    TieredBroker,
    recipe,
    segments_of,
    tiered_broker,
    value_of,
)
from tests.tiered.e2e.gated_rsm import HOLD_FILE
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

QUIET_S = 3.0
GATED_RSM = "tests.tiered.e2e.gated_rsm:GatedDirectoryRemoteStorageManager"


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredBroker]:
    base = tmp_path_factory.mktemp("faulty")
    root = str(Path(__file__).resolve().parents[3])
    env = {"PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    with tiered_broker(
        base,
        {
            "remote.log.storage.manager.class.name": GATED_RSM,
            "rsm.config.dir": str(base / "data-remote"),
            "remote.log.reader.threads": "1",
            "remote.log.reader.max.pending.tasks": "1",
        },
        env=env,
    ) as tb:
        yield tb


def test_failed_copy_is_cleaned_up_and_retried_with_a_new_segment_id(faulty: TieredBroker) -> None:
    topic = "fault-copy"
    faulty.arm_faults(fail_copy=1)
    faulty.create_topic(topic, 1, recipe())
    faulty.produce(topic, range(N + 1))
    faulty.wait_segs(topic, "COPY", segments_of(1))
    faulty.wait_tiered_up_to(topic, N)
    events = [(e.type, e.failed, e.segment_id) for e in faulty.events(topic)]
    (_, _, failed_id), (_, _, cleaned_id), (_, _, copied_id) = events[:3]
    assert [(t, f) for t, f, _ in events[:3]] == [
        ("COPY", True),
        ("DELETE", False),
        ("COPY", False),
    ]
    assert failed_id == cleaned_id != copied_id
    assert faulty.metric("tierlog_remote_copy_errors_total", topic=topic) == 1
    assert faulty.metric("tierlog_remote_copy_requests_total", topic=topic) == 2


def test_failed_delete_is_retried(faulty: TieredBroker) -> None:
    topic = "fault-delete"
    faulty.create_topic(topic, 1, recipe())
    faulty.produce(topic, range(2 * N + 1))
    faulty.wait_tiered_up_to(topic, 2 * N)
    faulty.arm_faults(fail_delete=1)
    faulty.delete_records(topic, 0, N)
    faulty.wait_segs(topic, "DELETE", segments_of(1))
    deletes = faulty.events(topic, "DELETE")
    assert [e.failed for e in deletes] == [True, False]
    assert deletes[0].segment_id == deletes[1].segment_id
    assert faulty.metric("tierlog_remote_delete_errors_total", topic=topic) == 1
    assert faulty.metric("tierlog_remote_delete_requests_total", topic=topic) == 2


def test_oversized_custom_metadata_undoes_the_copy_and_stops_copying(
    faulty: TieredBroker,
) -> None:
    topic = "fault-custom-metadata"
    faulty.arm_faults(custom_metadata_bytes=200)  # > remote.log.metadata.custom.metadata.max.bytes
    try:
        faulty.create_topic(topic, 1, recipe())
        faulty.produce(topic, range(2 * N + 1))
        wait_until(lambda: faulty.segs(topic, "DELETE") == segments_of(1), 30, what="undo")
        copied = faulty.events(topic, "COPY")
        assert [(Seg(e.start_offset, e.end_offset), e.failed) for e in copied] == [
            (Seg(0, N - 1), False)
        ]
        assert faulty.events(topic, "DELETE")[0].segment_id == copied[0].segment_id
        wait_until(
            lambda: faulty.metric("tierlog_remote_copy_errors_total", topic=topic) == 1,
            30,
            what="copy error counted",
        )
    finally:
        faulty.arm_faults()
    # the partition's copy task is cancelled: nothing more is uploaded, nothing leaves
    holds_for(
        lambda: len(faulty.events(topic, "COPY")) == 1,
        QUIET_S,
        "no copy after oversized custom metadata",
    )
    assert faulty.local_segments(topic) == [0, N, 2 * N]
    assert faulty.list_offsets(topic, 0, LATEST_TIERED)[:2] == (0, -1)


def _fetch_from_zero(
    tb: TieredBroker, topic: str, partitions: range
) -> dict[int, tuple[int, bytes]]:
    with WireConnection.to_bootstrap(tb.bootstrap) as c:
        topics = {topic: [fetch_partition(p, 0) for p in partitions]}
        r = c.call(ApiKey.FETCH, 12, **fetch_fields(topics, max_bytes=50 << 20, min_bytes=1))
    return {
        p.partition_index: (int(p.error_code), bytes(p.records or b""))
        for p in r.responses[0].partitions
    }


def test_full_reader_queue_fails_only_the_partitions_that_did_not_fit(
    faulty: TieredBroker,
) -> None:
    topic = "fault-reader-queue"
    faulty.create_topic(topic, 4, recipe())
    for p in range(4):
        faulty.produce(topic, range(N + 1), partition=p)
    for p in range(4):
        faulty.wait_tiered_up_to(topic, N, p)
    hold = faulty.remote_root / HOLD_FILE
    hold.touch()
    try:
        got = _fetch_from_zero(faulty, topic, range(4))
    finally:
        hold.unlink()
    # one reader thread (held at the gate) + one queued task: partitions 0 and 1 got a slot
    # and came back empty after remote.fetch.max.wait.ms; 2 and 3 were rejected at once
    assert got[0] == (0, b"") and got[1] == (0, b"")
    unknown = int(ErrorCode.UNKNOWN_SERVER_ERROR)
    assert got[2] == (unknown, b"") and got[3] == (unknown, b"")

    # with the gate open and the queue drained, two partitions fit again and return data
    def both() -> bool:
        r = _fetch_from_zero(faulty, topic, range(2))
        return all(
            code == 0 and offsets_and_values(data) == [(i, value_of(i)) for i in range(N)]
            for code, data in r.values()
        )

    wait_until(both, 30, what="data for both partitions")
