"""Issue 3's integration test: the topic-based RLMM keeps its state in a real ``tierlog serve``.

An RLMM in this process stores its events in the broker's ``__remote_log_metadata`` over the
wire. After a kill -9 and restart of the broker, a fresh RLMM rebuilds exactly the same cache
by a full replay and by snapshot plus tail, and mutators issued during the replay wait until
their partition is ready. The broker-side startup checks of the metadata topic follow.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.helpers.broker import BrokerProcess, BrokerStartError
from tests.helpers.poll import wait_until
from tests.tiered.e2e.e2e_helpers import N, TieredBroker, consume_confluent, recipe, value_of
from tests.tiered.e2e.wire_topic_io import WireMetadataTopicIO
from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tierlog.tiered.metadata import PartitionSnapshot, TopicBasedRemoteLogMetadataManager

S = RemoteLogSegmentState
METADATA_PARTITIONS = 3
SEG = 100


def _segment(tip: TopicIdPartition, start: int) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
        start_offset=start,
        end_offset=start + SEG - 1,
        max_timestamp_ms=1_000 + start,
        broker_id=0,
        event_timestamp_ms=1,
        segment_size_in_bytes=10 * SEG,
        custom_metadata=None,
        state=S.COPY_SEGMENT_STARTED,
        segment_leader_epochs={0: start},
        txn_idx_empty=True,
    )


def _update(
    md: RemoteLogSegmentMetadata, state: RemoteLogSegmentState
) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, 2, None, state, 0)


class Rlmm:
    """An RLMM over the broker, its topic access, and the props it was configured with."""

    def __init__(self, bootstrap: str, snapshot_dir: Path | None) -> None:
        self.io = WireMetadataTopicIO(bootstrap)
        self.rlmm = TopicBasedRemoteLogMetadataManager(self.io)
        props = {
            "remote.log.metadata.topic.num.partitions": str(METADATA_PARTITIONS),
            "remote.log.metadata.initialization.retry.max.timeout.ms": "30000",
            "remote.log.metadata.snapshot.interval.records": "100000",
            "remote.log.metadata.snapshot.interval.ms": "3600000",
            "broker.id": "0",
        }
        if snapshot_dir is None:
            props["remote.log.metadata.snapshot.enable"] = "false"
        else:
            props["remote.log.metadata.snapshot.dir"] = str(snapshot_dir)
        self.rlmm.configure(props)
        self.rlmm.await_initialized(30)

    def assign(self, tips: list[TopicIdPartition]) -> None:
        self.rlmm.on_partition_leadership_changes(set(tips), set())

    def wait_ready(self, tips: list[TopicIdPartition]) -> None:
        wait_until(lambda: all(self.rlmm.is_ready(t) for t in tips), 30, what="replay done")

    def state(self, tips: list[TopicIdPartition]) -> dict[TopicIdPartition, PartitionSnapshot]:
        return {t: self.rlmm.partition_snapshot(t) for t in tips}

    def close(self) -> None:
        self.rlmm.close()
        self.io.close()


def _lifecycle(r: Rlmm, tip: TopicIdPartition, starts: range, delete_first: bool) -> None:
    """Segments copied (STARTED, FINISHED), the first one then deleted (STARTED, FINISHED)."""
    futures: list[Future[None]] = []
    segs = [_segment(tip, s) for s in starts]
    for md in segs:
        r.rlmm.add_remote_log_segment_metadata(md).result(30)
        futures.append(
            r.rlmm.update_remote_log_segment_metadata(_update(md, S.COPY_SEGMENT_FINISHED))
        )
    for f in futures:
        f.result(30)
    if delete_first:
        r.rlmm.update_remote_log_segment_metadata(
            _update(segs[0], S.DELETE_SEGMENT_STARTED)
        ).result(30)
        r.rlmm.update_remote_log_segment_metadata(
            _update(segs[0], S.DELETE_SEGMENT_FINISHED)
        ).result(30)
    # one left in COPY_STARTED: listed, not readable
    r.rlmm.add_remote_log_segment_metadata(_segment(tip, starts.stop)).result(30)


@pytest.fixture
def plain_broker(broker_factory: Callable[..., BrokerProcess]) -> Iterator[BrokerProcess]:
    """A broker without its own tiering, so only the test's RLMM uses the metadata topic."""
    yield broker_factory({"remote.log.storage.system.enable": "false"})


def test_rlmm_state_survives_kill_9_by_replay_and_by_snapshot_plus_tail(
    plain_broker: BrokerProcess, tmp_path: Path
) -> None:
    snaps = tmp_path / "snapshots"
    topic_id = uuid.uuid4()
    tips = [TopicIdPartition(topic_id, "orders", p) for p in range(5)]
    tips.append(TopicIdPartition(uuid.uuid4(), "payments", 0))

    # phase 1: events, then a clean close that writes the snapshots
    first = Rlmm(plain_broker.bootstrap, snaps)
    first.assign(tips)
    first.wait_ready(tips)
    for i, tip in enumerate(tips):
        _lifecycle(first, tip, range(0, 3 * SEG, SEG), delete_first=i % 2 == 0)
    first.close()
    assert list(snaps.iterdir())

    # phase 2: more events after the snapshot (the tail), by an RLMM that keeps no snapshots
    second = Rlmm(plain_broker.bootstrap, None)
    second.assign(tips)
    second.wait_ready(tips)
    for tip in tips[:3]:
        _lifecycle(second, tip, range(10 * SEG, 12 * SEG, SEG), delete_first=True)
    expected = second.state(tips)
    second.close()
    # every partition has segments, in different states; the first three have a tail
    assert all(len(s.segments) >= 3 for s in expected.values())
    assert {m.state for s in expected.values() for m in s.segments} == {
        S.COPY_SEGMENT_STARTED,
        S.COPY_SEGMENT_FINISHED,
    }
    assert all(m.start_offset >= 10 * SEG for m in expected[tips[0]].segments[-2:])

    plain_broker.restart(kill=True)

    replayed = Rlmm(plain_broker.bootstrap, None)
    try:
        replayed.assign(tips)
        replayed.wait_ready(tips)
        assert replayed.state(tips) == expected
    finally:
        replayed.close()

    from_snapshot = Rlmm(plain_broker.bootstrap, snaps)
    try:
        # a mutator issued before the replay finished completes only once the partition is
        # ready (its event is applied after the replayed ones)
        tip = tips[0]
        md = _segment(tip, 20 * SEG)
        from_snapshot.assign(tips)
        ready_when_done: list[bool] = []
        f = from_snapshot.rlmm.add_remote_log_segment_metadata(md)
        f.add_done_callback(lambda _f: ready_when_done.append(from_snapshot.rlmm.is_ready(tip)))
        f.result(30)
        assert ready_when_done == [True]
        from_snapshot.wait_ready(tips)
        state = from_snapshot.state(tips)
        assert {t: s for t, s in state.items() if t != tip} == {
            t: s for t, s in expected.items() if t != tip
        }
        assert state[tip].segments == (*expected[tip].segments, md)
    finally:
        from_snapshot.close()


def test_metadata_topic_partition_count_is_fixed_after_creation(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory({"rlmm.config.remote.log.metadata.topic.num.partitions": "3"})
    assert b.stop() == 0
    b.overrides["rlmm.config.remote.log.metadata.topic.num.partitions"] = "4"
    with pytest.raises(BrokerStartError) as err:
        b.start()
    message = str(err.value)
    assert "tiered storage cannot start" in message
    assert "__remote_log_metadata has 3 partitions" in message
    assert "remote.log.metadata.topic.num.partitions=3" in message
    assert b.proc is not None and b.proc.returncode == 1


def test_broker_exits_when_the_metadata_topic_cannot_be_created_in_time(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    b = broker_factory(
        {
            "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
            "rlmm.config.remote.log.metadata.initialization.retry.max.timeout.ms": "1000",
        },
        start=False,
    )
    b.log_dir.mkdir(parents=True)
    (b.log_dir / "__remote_log_metadata-0").write_text("a file where a partition dir goes")
    with pytest.raises(BrokerStartError) as err:
        b.start()
    message = str(err.value)
    assert "could not create or read __remote_log_metadata within 1000 ms" in message
    assert b.proc is not None and b.proc.returncode == 1


def test_a_broker_with_default_settings_tiers_into_the_object_store_next_to_its_data(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory(
        {
            "remote.log.manager.task.interval.ms": "500",
            "log.retention.check.interval.ms": "500",
        }
    )
    tb = TieredBroker(b)
    try:
        tb.create_topic("defaults", 1, recipe())
        tb.produce("defaults", range(2 * N + 1))
        tb.wait_tiered_up_to("defaults", 2 * N)
        assert len(list(tb.remote_root.rglob("*.rsm-manifest"))) == 2
        assert consume_confluent(b.bootstrap, "defaults", 2 * N + 1) == [
            (i, value_of(i)) for i in range(2 * N + 1)
        ]
    finally:
        tb.close()
