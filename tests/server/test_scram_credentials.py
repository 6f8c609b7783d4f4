"""DescribeUserScramCredentials on a broker that stores no SCRAM credential: confluent-kafka's
admin client gets ZooKeeper-mode Kafka's answers (none for every user, RESOURCE_NOT_FOUND
for a named one), so tools that ask it after a user's quotas go on."""

from __future__ import annotations

from concurrent.futures import Future

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from tests.helpers.broker import BrokerProcess
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode


def test_describing_every_user_finds_no_credentials(module_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    every = admin.describe_user_scram_credentials()
    assert isinstance(every, Future)
    assert every.result(timeout=30) == {}


def test_a_named_user_has_no_credential(module_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    futures = admin.describe_user_scram_credentials(["alice"])
    assert isinstance(futures, dict)
    with pytest.raises(ck.KafkaException) as info:
        futures["alice"].result(timeout=30)
    assert info.value.args[0].code() == ck.KafkaError.RESOURCE_NOT_FOUND
    assert "does not exist: alice" in info.value.args[0].str()


def test_a_user_named_twice_is_a_duplicate(module_broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        resp = c.call(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=[{"name": "bob"}, {"name": "bob"}]
        )
    assert resp.error_code == ErrorCode.NONE
    assert [(r.user, r.error_code) for r in resp.results] == [("bob", ErrorCode.DUPLICATE_RESOURCE)]
