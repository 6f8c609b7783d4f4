"""Java properties files (config.properties): comments, separators, continuations, escapes."""

from __future__ import annotations

from tierlog.config.properties import parse_properties


def test_properties_parsing_basics() -> None:
    text = "# comment\n! also\nlog.dirs = /a,/b\nnum.partitions:3\nkey value with spaces\n"
    text += "multi=one\\\n    two\nesc=a\\tb\\u0041\n"
    assert parse_properties(text) == {
        "log.dirs": "/a,/b",
        "num.partitions": "3",
        "key": "value with spaces",
        "multi": "onetwo",
        "esc": "a\tbA",
    }
