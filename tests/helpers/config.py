"""Assertions shared by the configuration tests."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tierlog.config import ConfigError, load_broker_config


def assert_refused_naming(raw: Mapping[str, str], key: str) -> None:
    """Loading these broker settings fails, and the error names ``key`` first, as the
    startup error an operator reads does."""
    with pytest.raises(ConfigError) as e:
        load_broker_config(dict(raw))
    assert e.value.key == key
    assert str(e.value).startswith(key)
