"""Faults at the storage plugin boundary: a failed copy, a failed delete, oversized custom
metadata, and a full remote reader queue.

The broker loads ``gated_rsm`` (a directory RSM whose segment reads can be held) from this
directory; copy/delete/custom-metadata faults are armed through the directory RSM's control
file. Faults are broker-wide, so each test arms them only while its own topic is the only
one with work to do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import (
    TIERED_OVERRIDES,
    N,
    Seg,
    TieredBroker,
    offsets_and_values,
    recipe,
    segments_of,
    value_of,
)
from gated_rsm import HOLD_FILE

from helpers.broker import BrokerProcess
from helpers.poll import holds_for, wait_until
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

EARLIEST_LOCAL, LATEST_TIERED = -4, -5
QUIET_S = 3.0


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredBroker]:
    base = tmp_path_factory.mktemp("faulty")
    here = str(Path(__file__).parent)
    env = {"PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    b = BrokerProcess(
        base,
        {
            **TIERED_OVERRIDES,
            "remote.log.storage.manager.class.name": "gated_rsm:GatedDirectoryRemoteStorageManager",
            "rsm.config.dir": str(base / "data-remote"),
            "remote.log.reader.threads": "1",
            "remote.log.reader.max.pending.tasks": "1",
        },
        env=env,
    )
    b.start()
    tb = TieredBroker(b)
    yield tb
    tb.close()
    b.close()


def _tiered_up_to(tb: TieredBroker, topic: str, end: int, partition: int = 0) -> None:
    wait_until(
        lambda: (
            tb.list_offsets(topic, partition, LATEST_TIERED)[1] == end - 1
            and tb.list_offsets(topic, partition, EARLIEST_LOCAL)[1] == end
        ),
        30,
        what=f"{topic}-{partition} tiered up to {end}",
    )


def test_failed_copy_is_cleaned_up_and_retried_with_a_new_segment_id(faulty: TieredBroker) -> None:
    topic = "fault-copy"
    faulty.arm_faults(fail_copy=1)
    faulty.create_topic(topic, 1, recipe())
    faulty.produce(topic, range(N + 1))
    faulty.wait_segs(topic, "COPY", segments_of(1))
    _tiered_up_to(faulty, topic, N)
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
    _tiered_up_to(faulty, topic, 2 * N)
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
        r = c.call(
            ApiKey.FETCH,
            12,
            replica_id=-1,
            max_wait=0,
            min_bytes=1,
            max_bytes=50 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": p,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                        for p in partitions
                    ],
                }
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
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
        _tiered_up_to(faulty, topic, N, p)
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
