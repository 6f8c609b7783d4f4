"""A WriteTxnMarkers whose coordinator hangs up while the marker is made durable: the marker
is in the log, so the group coordinator must still be told of it once it is durable, or the
offsets cache forgets a transaction the log completed (a broker in this process, so the
fsync can be held)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from tests.helpers.inprocess_broker import broker_with_topic, until
from tests.helpers.txn_wire import NO_VERIFICATION, produce_txn
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_request, request_schema
from tierlog.server.txn_partition_hooks import TxnMarkerListener

TOPIC = "marked"
PID = 9001
Seen = tuple[str, int, int, bool, int]


class Recorder:
    """The broker's listener, with every marker it is told of kept."""

    def __init__(self, inner: TxnMarkerListener | None) -> None:
        self.inner = inner
        self.seen: list[Seen] = []

    def on_marker(
        self, topic: str, partition: int, producer_id: int, committed: bool, marker_offset: int
    ) -> None:
        self.seen.append((topic, partition, producer_id, committed, marker_offset))
        if self.inner is not None:
            self.inner.on_marker(topic, partition, producer_id, committed, marker_offset)


def _commit_marker() -> bytes:
    schema = request_schema(ApiKey.WRITE_TXN_MARKERS, 1)
    assert schema is not None
    body = mk(
        schema,
        markers=[
            {
                "producer_id": PID,
                "producer_epoch": 0,
                "transaction_result": True,
                "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ],
    )
    return encode_request(ApiKey.WRITE_TXN_MARKERS, 1, 1, "coordinator", body)


def test_a_marker_made_durable_after_its_coordinator_hung_up_still_reaches_the_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    held: list[int] = []
    real = os.fsync

    async def scenario() -> None:
        async with broker_with_topic(
            tmp_path, TOPIC, {"flush.messages": "1"}, NO_VERIFICATION
        ) as run:
            produced = await asyncio.to_thread(
                produce_txn, run.client, TOPIC, 0, [b"v"], producer_id=PID
            )
            assert produced == (0, 0)
            recorder = Recorder(run.state.txn_marker_listener)
            run.state.txn_marker_listener = recorder

            def fsync(fd: int) -> None:
                if run.is_segment(fd) and threading.get_ident() != run.loop_thread:
                    held.append(fd)
                    release.wait(10)
                real(fd)

            monkeypatch.setattr(os, "fsync", fsync)
            try:
                assert run.broker.bound is not None
                _, writer = await asyncio.open_connection(*run.broker.bound)
                writer.write(_commit_marker())
                await writer.drain()
                await until(lambda: bool(held))
                writer.close()
                await writer.wait_closed()
                await until(lambda: run.broker.open_connections == 1)  # the helper's own
                assert recorder.seen == [], "told of the marker before it was durable"
                release.set()
                await until(lambda: bool(recorder.seen))
                assert recorder.seen == [(TOPIC, 0, PID, True, 1)]
                assert run.plog.recovery_point == 2
            finally:
                release.set()
                monkeypatch.undo()

    asyncio.run(scenario())
