"""Topic config changes of a running tiered broker: enabling tiering on an existing topic,
``remote.log.copy.disable`` off and on again, and turning tiering off with delete."""

from __future__ import annotations

from tests.helpers.poll import holds_for
from tests.helpers.wire import EARLIEST, LATEST_TIERED
from tests.tiered.e2e.e2e_helpers import N, Seg, TieredBroker, recipe, segments_of
from tierlog.protocol.errors import ErrorCode

#: Six task intervals: long enough for the copy task to have acted if it were running.
QUIET_S = 3.0


def test_enabling_tiering_on_an_existing_topic_uploads_its_sealed_segments(
    tiered: TieredBroker,
) -> None:
    topic = "enable-existing"
    tiered.create_topic(topic, 1, {"index.interval.bytes": "1", "segment.index.bytes": str(12 * N)})
    tiered.produce(topic, range(3 * N + 1))
    assert tiered.local_segments(topic) == [0, N, 2 * N, 3 * N]
    assert tiered.list_offsets(topic, 0, LATEST_TIERED)[:2] == (0, -1)
    assert tiered.events(topic) == []

    code, message = tiered.alter(
        topic, **{"remote.storage.enable": "true", "local.retention.bytes": "1"}
    )
    assert code == 0, message
    tiered.wait_segs(topic, "COPY", segments_of(3))
    tiered.wait_tiered_up_to(topic, 3 * N)
    assert tiered.local_segments(topic) == [3 * N]
    assert tiered.list_offsets(topic, 0, EARLIEST)[1] == 0


def test_copy_disabled_then_reenabled(tiered: TieredBroker) -> None:
    topic = "copy-disable"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(2 * N + 1))
    tiered.wait_tiered_up_to(topic, 2 * N)
    assert tiered.segs(topic, "COPY") == segments_of(2)

    # while copy is disabled local.retention.* must follow retention.* (KIP-950)
    code, message = tiered.alter(
        topic, **{"remote.log.copy.disable": "true", "local.retention.bytes": None}
    )
    assert code == 0, message
    tiered.produce(topic, range(2 * N + 1, 4 * N + 1))
    holds_for(
        lambda: tiered.segs(topic, "COPY") == segments_of(2),
        QUIET_S,
        "no segment is copied while remote.log.copy.disable=true",
    )
    assert tiered.local_segments(topic) == [2 * N, 3 * N, 4 * N]
    # reads of the remote tier keep working
    assert tiered.list_offsets(topic, 0, EARLIEST)[1] == 0
    assert tiered.list_offsets(topic, 0, LATEST_TIERED)[1] == 2 * N - 1

    code, message = tiered.alter(
        topic, **{"remote.log.copy.disable": "false", "local.retention.bytes": "1"}
    )
    assert code == 0, message
    tiered.wait_segs(topic, "COPY", segments_of(4))
    tiered.wait_tiered_up_to(topic, 4 * N)


def test_disabling_tiering_requires_delete_on_disable_and_deletes_remote_data(
    tiered: TieredBroker,
) -> None:
    topic = "disable-with-delete"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(3 * N + 1))
    tiered.wait_tiered_up_to(topic, 3 * N)

    code, _ = tiered.alter(topic, **{"remote.storage.enable": "false"})
    assert code == int(ErrorCode.INVALID_CONFIG)
    assert tiered.segs(topic, "DELETE") == []

    code, message = tiered.alter(
        topic,
        **{"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"},
    )
    assert code == 0, message
    # AlterConfigs returns once the remote data is deleted
    assert sorted(tiered.segs(topic, "DELETE"), key=lambda s: s.start) == segments_of(3)
    assert list(tiered.remote_root.glob(f"{topic}-0-*/*.log")) == []
    # the log now starts where the local tier does
    assert tiered.list_offsets(topic, 0, EARLIEST)[1] == 3 * N
    assert tiered.list_offsets(topic, 0, LATEST_TIERED)[:3] == (0, -1, -1)
    # new segments stay local
    tiered.produce(topic, range(3 * N + 1, 4 * N + 1))
    assert Seg(3 * N, 4 * N - 1) not in tiered.segs(topic, "COPY")
