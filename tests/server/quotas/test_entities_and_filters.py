"""Kafka's entity names and paths (``Sanitizer``, ``<default>``), the values AlterClientQuotas
accepts, and DescribeClientQuotas' strict and non-strict filters over stored entities."""

from __future__ import annotations

import pytest

from tierlog.server.quotas.admin import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    FilterComponent,
    Op,
    altered,
    describe,
)
from tierlog.server.quotas.entities import (
    USER_CLIENT_KEYS,
    InvalidQuotaRequest,
    QuotaEntity,
    checked_value,
    desanitize,
    precedence,
    sanitize,
)


def test_names_are_sanitized_as_kafka_does() -> None:
    assert sanitize("user@example.com") == "user%40example.com"
    assert sanitize("a b*c~") == "a%20b%2Ac%7E"
    assert sanitize("<default>") == "%3Cdefault%3E"
    assert desanitize(sanitize("CN=x, O=y/ü")) == "CN=x, O=y/ü"
    entity = QuotaEntity.from_wire([("user", "a/b"), ("client-id", None)])
    assert entity.path == "users/a%2Fb/clients/<default>"
    assert QuotaEntity.from_path(entity.path) == entity
    assert entity.to_wire() == [("user", "a/b"), ("client-id", None)]
    assert QuotaEntity.from_path("topics/t") is None


def test_precedence_lists_kafkas_eight_levels() -> None:
    assert [level.path for level in precedence("u", "c")] == [
        "users/u/clients/c",
        "users/u/clients/<default>",
        "users/u",
        "users/<default>/clients/c",
        "users/<default>/clients/<default>",
        "users/<default>",
        "clients/c",
        "clients/<default>",
    ]


def test_values_are_stored_as_kafka_stores_them() -> None:
    assert checked_value("producer_byte_rate", 1024.0000001, USER_CLIENT_KEYS) == "1024"
    assert checked_value("request_percentage", 50, USER_CLIENT_KEYS) == "50.0"
    for key, value in [("producer_byte_rate", 0.5), ("producer_byte_rate", 0), ("x", 1)]:
        with pytest.raises(InvalidQuotaRequest):
            checked_value(key, value, USER_CLIENT_KEYS)
    entity = QuotaEntity(client_id="c")
    current = {"producer_byte_rate": "10", "consumer_byte_rate": "20"}
    ops = [Op("producer_byte_rate", 0, True), Op("request_percentage", 5.5, False)]
    assert altered(entity, current, ops) == {
        "consumer_byte_rate": "20",
        "request_percentage": "5.5",
    }


STORED = {
    "users/u": {"producer_byte_rate": "1"},
    "users/u/clients/c": {"producer_byte_rate": "2"},
    "users/<default>": {"producer_byte_rate": "3"},
    "clients/c": {"producer_byte_rate": "4"},
    "clients/<default>": {"producer_byte_rate": "5"},
    "clients/no-quota": {"something.else": "6"},
}


def _paths(components: list[FilterComponent], strict: bool) -> set[str]:
    return {entity.path for entity, _ in describe(STORED, components, strict)}


@pytest.mark.parametrize(
    ("components", "strict", "expected"),
    [
        ([], False, set(STORED) - {"clients/no-quota"}),
        ([], True, set()),
        ([FilterComponent("user", MATCH_EXACT, "u")], False, {"users/u", "users/u/clients/c"}),
        ([FilterComponent("user", MATCH_EXACT, "u")], True, {"users/u"}),
        ([FilterComponent("user", MATCH_DEFAULT, None)], True, {"users/<default>"}),
        (
            [FilterComponent("user", MATCH_SPECIFIED, None)],
            False,
            {"users/u", "users/u/clients/c", "users/<default>"},
        ),
        (
            [FilterComponent("client-id", MATCH_SPECIFIED, None)],
            True,
            {"clients/c", "clients/<default>"},
        ),
        (
            [
                FilterComponent("user", MATCH_SPECIFIED, None),
                FilterComponent("client-id", MATCH_EXACT, "c"),
            ],
            True,
            {"users/u/clients/c"},
        ),
        ([FilterComponent("ip", MATCH_SPECIFIED, None)], False, set()),
    ],
)
def test_describe_filters(
    components: list[FilterComponent], strict: bool, expected: set[str]
) -> None:
    assert _paths(components, strict) == expected
