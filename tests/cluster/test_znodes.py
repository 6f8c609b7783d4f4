"""Znode JSON in Kafka's formats (spec/kafka-replication.md §6.1): what Kafka 3.x writes
decodes, and what tierlog writes has Kafka's fields."""

from __future__ import annotations

import json

import pytest

from tierlog.cluster import paths
from tierlog.cluster.znodes import (
    BrokerRegistration,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    ZnodeFormatError,
    decode_controller_epoch,
    encode_controller_epoch,
)
from tierlog.config import Endpoint


def test_paths_follow_kafkas_layout() -> None:
    assert paths.broker(3) == "/brokers/ids/3"
    assert paths.topic("t") == "/brokers/topics/t"
    assert paths.partition_state("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert paths.CONTROLLER == "/controller"
    assert paths.CONTROLLER_EPOCH == "/controller_epoch"
    assert paths.topic_config("t") == "/config/topics/t"
    assert paths.delete_topic_request("t") == "/admin/delete_topics/t"


def test_broker_registration_v5() -> None:
    reg = BrokerRegistration(
        broker_id=1,
        endpoints=(Endpoint("PLAINTEXT", "h1", 9092), Endpoint("INTERNAL", "h1", 9093)),
        rack="r1",
        timestamp_ms=1700000000000,
    )
    obj = json.loads(reg.encode())
    assert obj == {
        "version": 5,
        "host": "h1",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "1700000000000",
        "endpoints": ["PLAINTEXT://h1:9092", "INTERNAL://h1:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        "rack": "r1",
        "features": {},
    }
    assert BrokerRegistration.decode(1, reg.encode()) == reg
    without_rack = BrokerRegistration(2, (Endpoint("PLAINTEXT", "h2", 1),))
    assert "rack" not in json.loads(without_rack.encode())


def test_broker_registration_written_by_kafka() -> None:
    data = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://kafka-0:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"kafka-0","version":5,"timestamp":"1696000000000"}'
    )
    reg = BrokerRegistration.decode(0, data)
    assert reg.endpoints == (Endpoint("PLAINTEXT", "kafka-0", 9092),)
    assert reg.rack is None
    assert reg.timestamp_ms == 1696000000000


def test_controller_znodes() -> None:
    assert json.loads(ControllerRegistration(2, 5).encode()) == {
        "version": 1,
        "brokerid": 2,
        "timestamp": "5",
    }
    kafka_34 = b'{"version":2,"brokerid":4,"timestamp":"1","kraftControllerEpoch":-1}'
    assert ControllerRegistration.decode(kafka_34).broker_id == 4
    assert encode_controller_epoch(7) == b"7"
    assert decode_controller_epoch(b"12") == 12
    with pytest.raises(ZnodeFormatError):
        decode_controller_epoch(b"x")


def test_topic_assignment_v3() -> None:
    data = (
        b'{"removing_replicas":{},"partitions":{"2":[3,1,2],"1":[2,3,1],"0":[1,2,3]},'
        b'"topic_id":"Fg9wOTGxQ3GPtL9sZ6kQ7w","adding_replicas":{},"version":3}'
    )
    assignment = TopicAssignment.decode(data)
    assert assignment.partitions == {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
    assert assignment.topic_id == "Fg9wOTGxQ3GPtL9sZ6kQ7w"
    assert TopicAssignment.decode(assignment.encode()) == assignment
    obj = json.loads(assignment.encode())
    assert obj["version"] == 3
    assert obj["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1], "2": [3, 1, 2]}
    assert obj["adding_replicas"] == {} and obj["removing_replicas"] == {}
    reassigning = TopicAssignment({0: (4, 1)}, adding={0: (4,)}, removing={0: (1,)})
    assert TopicAssignment.decode(reassigning.encode()) == reassigning
    old = TopicAssignment.decode(b'{"version":1,"partitions":{"0":[1]}}')
    assert old.partitions == {0: (1,)} and old.topic_id is None


def test_partition_state() -> None:
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=3)
    assert json.loads(state.encode()) == {
        "controller_epoch": 3,
        "leader": 1,
        "version": 1,
        "leader_epoch": 4,
        "isr": [1, 2],
    }
    assert PartitionState.decode(state.encode()) == state
    recovering = PartitionState(2, 5, (2,), 3, leader_recovery_state=1)
    assert json.loads(recovering.encode())["leader_recovery_state"] == 1
    assert PartitionState.decode(recovering.encode()) == recovering


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1]",
        b'{"leader":1,"leader_epoch":0,"controller_epoch":1}',
        b'{"leader":"1","leader_epoch":0,"isr":[1],"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":0,"isr":[true],"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,"leader_recovery_state":7}',
    ],
)
def test_malformed_partition_state_is_refused(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        PartitionState.decode(data)
