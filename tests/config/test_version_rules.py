"""Kafka's start-up checks that tie the version keys and the per-IP limit to other keys."""

from __future__ import annotations

import pytest

from tests.helpers.config import assert_refused_naming
from tierlog.config import ConfigError, load_broker_config
from tierlog.config.kafka_versions import ignores_message_format, record_format


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.9.0", 0), ("0.10.0-IV1", 1), ("0.10.2.1", 1), ("0.11.0", 2), ("2.8-IV1", 2), ("3.7", 2)],
)
def test_record_format_of_a_kafka_version(version: str, expected: int) -> None:
    assert record_format(version) == expected


def test_message_format_newer_than_the_protocol_is_refused_with_kafkas_message() -> None:
    raw = {"inter.broker.protocol.version": "0.10.2", "log.message.format.version": "2.8"}
    assert_refused_naming({"inter.broker.protocol.version": "0.10.2"}, "log.message.format.version")
    assert_refused_naming(raw, "log.message.format.version")
    with pytest.raises(ConfigError, match=r"set to version 0\.11\.0 or higher"):
        load_broker_config(raw)


def test_message_format_at_or_below_the_protocol_is_accepted() -> None:
    cfg = load_broker_config(
        {"inter.broker.protocol.version": "2.8", "log.message.format.version": "0.10.2"}
    )
    assert cfg.values["log.message.format.version"] == "0.10.2"


def test_a_3x_protocol_ignores_the_message_format() -> None:
    assert ignores_message_format("3.0-IV1")
    assert not ignores_message_format("2.8")
    cfg = load_broker_config(
        {"inter.broker.protocol.version": "3.7", "log.message.format.version": "3.9"}
    )
    assert cfg.values["inter.broker.protocol.version"] == "3.7"


def test_zstd_offsets_need_a_protocol_with_record_batches() -> None:
    raw = {
        "inter.broker.protocol.version": "0.10.2",
        "log.message.format.version": "0.10.2",
        "offsets.topic.compression.codec": "4",
    }
    assert_refused_naming(raw, "offsets.topic.compression.codec")
    load_broker_config(
        {"inter.broker.protocol.version": "2.1", "offsets.topic.compression.codec": "4"}
    )


def test_zero_connections_per_ip_needs_overrides() -> None:
    assert_refused_naming({"max.connections.per.ip": "0"}, "max.connections.per.ip")
    cfg = load_broker_config(
        {"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:5"}
    )
    assert cfg.values["max.connections.per.ip"] == 0
