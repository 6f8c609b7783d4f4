"""KIP-430 authorized operations over the wire: answered only when asked for, and then (with
no authorizer) every operation ACLs can name for the resource type, as Kafka answers."""

from __future__ import annotations

from typing import Any

from tests.helpers.broker import BrokerProcess
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.server.handlers.authorized_operations import (
    NOT_REQUESTED,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    authorized_operations,
    bit_field,
)

# Kafka's own figures for a broker without an authorizer.
TOPIC_BITS = 3576
GROUP_BITS = 328
CLUSTER_BITS = 8096


def test_table_is_kafkas_supported_operations() -> None:
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC]) == TOPIC_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.GROUP]) == GROUP_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER]) == CLUSTER_BITS
    assert bit_field([AclOperation.READ]) == 1 << 3
    assert authorized_operations(ResourceType.TOPIC, False) == NOT_REQUESTED == -(2**31)
    assert authorized_operations(ResourceType.GROUP, True) == GROUP_BITS


def _create(c: WireConnection, name: str) -> None:
    r = c.call(
        ApiKey.CREATE_TOPICS,
        7,
        topics=[{"name": name, "num_partitions": 1, "replication_factor": 1, "configs": []}],
        timeout=10_000,
        validate_only=False,
    )
    assert int(r.topics[0].error_code) == 0


def _metadata(c: WireConnection, version: int, topics: list[str], ask: bool) -> Any:
    fields: dict[str, Any] = {
        "topics": [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": ask,
    }
    if version <= 10:
        fields["include_cluster_authorized_operations"] = ask
    return c.call(ApiKey.METADATA, version, **fields)


def test_metadata_answers_when_asked(module_broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        _create(c, "kip430")
        asked = _metadata(c, 10, ["kip430", "kip430-missing"], True)
        assert [t.topic_authorized_operations for t in asked.topics] == [TOPIC_BITS] * 2
        assert asked.cluster_authorized_operations == CLUSTER_BITS
        plain = _metadata(c, 10, ["kip430"], False)
        assert plain.topics[0].topic_authorized_operations == NOT_REQUESTED
        assert plain.cluster_authorized_operations == NOT_REQUESTED
        latest = _metadata(c, 12, ["kip430"], True)
        assert latest.topics[0].topic_authorized_operations == TOPIC_BITS


def test_describe_cluster_answers_when_asked(module_broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        for ask, bits in ((True, CLUSTER_BITS), (False, NOT_REQUESTED)):
            r = c.call(
                ApiKey.DESCRIBE_CLUSTER,
                1,
                include_cluster_authorized_operations=ask,
                endpoint_type=1,
            )
            assert r.cluster_authorized_operations == bits


def test_describe_groups_answers_when_asked(module_broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        for ask, bits in ((True, GROUP_BITS), (False, NOT_REQUESTED)):
            r = c.call(
                ApiKey.DESCRIBE_GROUPS,
                5,
                groups=["kip430-group"],
                include_authorized_operations=ask,
            )
            [g] = r.groups
            assert int(g.error_code) == 0
            assert g.authorized_operations == bits
