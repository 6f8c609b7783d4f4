"""The ``__consumer_offsets`` topic configs the broker gives it: Kafka's (compacted, the
``offsets.topic.segment.bytes`` segments), and a topic made before compaction switched over."""

from __future__ import annotations

from pathlib import Path

from tierlog.config.broker import BrokerConfig, load_broker_config
from tierlog.config.topic import render_overrides
from tierlog.log import LogConfig, LogManager
from tierlog.server.group import OFFSETS_TOPIC
from tierlog.server.groups_wiring import LEGACY_OFFSETS_TOPIC_CONFIGS, _ensure_offsets_topic
from tierlog.server.topics import TopicManager


def _topics(tmp_path: Path, **overrides: str) -> tuple[BrokerConfig, TopicManager, LogManager]:
    raw = {"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": "2"}
    raw.update(overrides)
    cfg = load_broker_config(raw)
    logs = LogManager([tmp_path / "data"], LogConfig())
    topics = TopicManager(cfg, logs, tmp_path)
    logs.load(topics.load())
    topics.attach_logs()
    return cfg, topics, logs


def test_new_offsets_topic_is_compacted_with_kafkas_segment_size(tmp_path: Path) -> None:
    cfg, topics, logs = _topics(tmp_path, **{"offsets.topic.segment.bytes": "65536"})
    assert _ensure_offsets_topic(cfg, topics) == 2
    info = topics.get(OFFSETS_TOPIC)
    assert info is not None
    assert render_overrides(info.overrides) == {
        "cleanup.policy": "compact",
        "segment.bytes": "65536",
        "compression.type": "producer",
    }
    plog = topics.get_log(OFFSETS_TOPIC, 0)
    assert plog.config.compacted and not plog.config.delete_enabled
    assert plog.config.segment_bytes == 65536
    logs.shutdown()


def test_offsets_topic_made_before_compaction_is_switched_over(tmp_path: Path) -> None:
    _, topics, logs = _topics(tmp_path)
    topics.ensure(OFFSETS_TOPIC, 2, LEGACY_OFFSETS_TOPIC_CONFIGS)
    logs.shutdown()

    cfg, topics, logs = _topics(tmp_path)
    _ensure_offsets_topic(cfg, topics)
    info = topics.get(OFFSETS_TOPIC)
    assert info is not None
    assert render_overrides(info.overrides)["cleanup.policy"] == "compact"
    assert topics.get_log(OFFSETS_TOPIC, 1).config.compacted
    logs.shutdown()


def test_an_operators_own_offsets_topic_configs_are_left_alone(tmp_path: Path) -> None:
    cfg, topics, logs = _topics(tmp_path)
    topics.ensure(OFFSETS_TOPIC, 2, {"cleanup.policy": "compact,delete", "retention.ms": "-1"})
    _ensure_offsets_topic(cfg, topics)
    info = topics.get(OFFSETS_TOPIC)
    assert info is not None
    assert render_overrides(info.overrides)["cleanup.policy"] == "compact,delete"
    logs.shutdown()
