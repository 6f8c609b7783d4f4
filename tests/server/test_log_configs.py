"""A partition's LogConfig (server.log_configs) carries the topic's effective values."""

from __future__ import annotations

from tierlog.config import (
    load_broker_config,
    parse_topic_overrides,
)
from tierlog.server.log_configs import log_config_for


def test_log_config_carries_effective_values() -> None:
    cfg = load_broker_config(
        {"log.segment.bytes": "4096", "log.message.timestamp.type": "LogAppendTime"}
    )
    lc = log_config_for(parse_topic_overrides({"retention.bytes": "100000"}), cfg)
    assert lc.segment_bytes == 4096
    assert lc.log_append_time
    assert lc.retention_bytes == 100000
    assert lc.cleanup_policy == ("delete",)
