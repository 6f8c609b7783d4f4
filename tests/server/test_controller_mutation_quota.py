"""KIP-599's ``controller_mutation_rate`` on a real single-node broker, over the wire at the
versions that decide how a client is held to it: CreateTopics v7, CreatePartitions v3 and
DeleteTopics v6 are strict (a topic is refused with THROTTLING_QUOTA_EXCEEDED once the
client's bucket is below zero, and the response carries the throttle time); CreateTopics v5
is permissive (every topic is created and the response is throttled). The bucket holds
``controller.quota.window.num`` x ``.size.seconds`` seconds of the rate: 2 partitions at
1 partition per second here, so a bucket taken to -10 stays below zero for 10 s, longer
than the requests that follow need."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from tests.helpers import client_quotas as cq
from tests.helpers.broker import BrokerProcess
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey

THROTTLED = 89
THROTTLED_RESPONSES = "tierlog_client_quota_throttled_responses_total"
WINDOW = {"controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"}


def _ms(value: Any) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


def _create(conn: WireConnection, version: int, topics: dict[str, int]) -> Any:
    """One CreateTopics of ``topics`` (name: partitions)."""
    return conn.call(
        ApiKey.CREATE_TOPICS,
        version,
        topics=[
            {
                "name": n,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for n, partitions in topics.items()
        ],
        timeout=30_000,
        validate_only=False,
    )


def test_strict_versions_refuse_topics_once_the_bucket_is_spent(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory(WINDOW)
    assert cq.alter(b.bootstrap, {"client-id": "admin-x"}, {"controller_mutation_rate": 1}) == (
        0,
        None,
    )
    with WireConnection(*b.host_port, client_id="admin-x") as conn:
        r = _create(conn, 7, {"t1": 2, "t2": 10, "t3": 1})
        codes = [int(t.error_code) for t in r.topics]
        assert codes == [0, 0, THROTTLED], "t2 is charged in full: the bucket goes to -10"
        assert r.topics[2].error_message == "The throttling quota has been exceeded."
        assert 5000 < _ms(r.throttle_time) <= 10_000
    # A connection is muted for the throttle time its response carries; the bucket is the
    # client's, so a new connection with its id is refused at once.
    with WireConnection(*b.host_port, client_id="admin-x") as conn:
        grow = conn.call(
            ApiKey.CREATE_PARTITIONS,
            3,
            topics=[{"name": "t1", "count": 4, "assignments": None}],
            timeout=30_000,
            validate_only=False,
        )
        assert int(grow.results[0].error_code) == THROTTLED
    with WireConnection(*b.host_port, client_id="admin-x") as conn:
        dropped = conn.call(
            ApiKey.DELETE_TOPICS, 6, topics=[{"name": "t1", "topic_id": None}], timeout=30_000
        )
        assert int(dropped.responses[0].error_code) == THROTTLED
    with WireConnection(*b.host_port, client_id="admin-x") as conn:
        dry = conn.call(
            ApiKey.CREATE_TOPICS,
            7,
            topics=[
                {
                    "name": "t4",
                    "num_partitions": 8,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            timeout=30_000,
            validate_only=True,
        )
        assert int(dry.topics[0].error_code) == 0, "validate_only is never held to the quota"
    with WireConnection(*b.host_port, client_id="someone-else") as other:
        created = _create(other, 7, {"o1": 2, "o2": 2, "o3": 2})
        assert [int(t.error_code) for t in created.topics] == [0] * 3
        assert _ms(created.throttle_time) == 0
    assert b.metric(THROTTLED_RESPONSES, quota="ControllerMutation") >= 1


def test_permissive_versions_create_everything_and_throttle_the_response(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory(WINDOW)
    assert cq.alter(b.bootstrap, {"client-id": None}, {"controller_mutation_rate": 1}) == (0, None)
    with WireConnection(*b.host_port, client_id="old-admin") as conn:
        r = _create(conn, 5, {"p1": 2, "p2": 2, "p3": 2})
        assert [int(t.error_code) for t in r.topics] == [0, 0, 0]
        assert 2000 < _ms(r.throttle_time) <= 4000, "6 partitions against a bucket of 2"
    with WireConnection(*b.host_port) as conn:
        names = {t.name for t in conn.call(ApiKey.METADATA, 1, topics=None).topics}
    assert {"p1", "p2", "p3"} <= names
