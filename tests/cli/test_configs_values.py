"""How ``tierlog configs`` reads ``--add-config`` and ``--add-config-file`` and prints a
quota value: as Kafka's ``ConfigCommand`` and Java's ``Double.toString`` do, since scripts
written against Kafka's tool pass the same strings and compare the printed text."""

from __future__ import annotations

import pytest

from tierlog.cli.configs.values import (
    ConfigValueError,
    java_double,
    parse_add_config,
    parse_java_double,
    parse_properties,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1024.0, "1024.0"),
        (0.5, "0.5"),
        (9_999_999.0, "9999999.0"),
        (10_000_000.0, "1.0E7"),
        (10_485_760.0, "1.048576E7"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (-2.5e-5, "-2.5E-5"),
        (0.0, "0.0"),
    ],
)
def test_quota_values_print_as_java_doubles(value: float, text: str) -> None:
    assert java_double(value) == text


def test_add_config_groups_commas_in_brackets_and_keeps_empty_values() -> None:
    assert parse_add_config("a=1, b = [x,y] ,c=,d=[]") == {"a": "1", "b": "x,y", "c": "", "d": ""}
    assert parse_add_config("a=1,") == {"a": "1"}
    with pytest.raises(ConfigValueError, match='must be in the format "key=val"'):
        parse_add_config("a=1,b")


def test_properties_files_are_read_as_java_reads_them() -> None:
    text = "# comment\n! also\n\na=1\nb : 2\nc 3\nd = long\\\n    value\ne=tab\\there\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "longvalue",
        "e": "tab\there",
    }


def test_quota_values_parse_as_java_parses_them() -> None:
    assert parse_java_double("k", " 1e3 ") == 1000.0
    assert parse_java_double("k", "5d") == 5.0
    for bad in ("1_000", "inf", "ten"):
        with pytest.raises(
            ConfigValueError, match=f"Cannot parse quota configuration value for k: {bad}"
        ):
            parse_java_double("k", bad)
