"""``ApiKey`` is Kafka's table of API keys, and the advertised APIs carry Kafka's names."""

from __future__ import annotations

from kio.schema.index import api_key_map

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.versions import ADVERTISED, api_name


def test_every_kafka_api_key_is_named_as_kio_names_it() -> None:
    assert {int(k): k.name.lower() for k in ApiKey} == dict(api_key_map)


def test_kafka_names_of_served_apis() -> None:
    assert ApiKey.LIST_OFFSETS.kafka_name == "ListOffsets"
    assert ApiKey.INCREMENTAL_ALTER_CONFIGS.kafka_name == "IncrementalAlterConfigs"
    assert api_name(ApiKey.DESCRIBE_CLUSTER) == "DescribeCluster"
    assert api_name(18) == "ApiVersions"
    assert all(isinstance(k, ApiKey) for k in ADVERTISED)


def test_unserved_and_unknown_keys_are_named_by_number() -> None:
    assert api_name(ApiKey.SASL_HANDSHAKE) == "Unknown17"
    assert api_name(999) == "Unknown999"
