"""Damaged broker state files stop the broker with a message naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.broker import serve_to_exit
from tierlog.server.state_files import StateFileError, read_json, write_json


def test_read_json_names_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "__tierlog_topics.json"
    write_json(path, {"topics": {}})
    assert read_json(path) == {"topics": {}}
    path.write_bytes(b'{"topics": \xff')
    with pytest.raises(StateFileError, match=r"__tierlog_topics\.json is damaged"):
        read_json(path)
    assert read_json(tmp_path / "missing.json") is None


def test_broker_refuses_to_start_on_a_damaged_topic_registry(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "__tierlog_topics.json").write_text('{"topics": [unterminated')
    out = serve_to_exit(data, {"metrics.listener": "http://127.0.0.1:0"})
    assert out.returncode == 1, out.stderr
    assert "__tierlog_topics.json is damaged" in out.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"entities": {"clients/a": ', "client-quotas.json is damaged"),
        ('{"entities": {"topics/t": {}}}', "'topics/t' is not a quota entity"),
    ],
)
def test_broker_refuses_to_start_on_damaged_client_quotas(
    tmp_path: Path, content: str, message: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "client-quotas.json").write_text(content)
    out = serve_to_exit(data, {})
    assert out.returncode == 1, out.stderr
    assert message in out.stderr
