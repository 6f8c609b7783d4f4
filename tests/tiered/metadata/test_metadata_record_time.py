"""Records of ``__remote_log_metadata`` carry the time they were written, as a producer's
CreateTime: a replica that runs for a while with a default time retention (a broker that
adopted the topic from disk before it knew the topic's definition) keeps them."""

from __future__ import annotations

import time
from pathlib import Path

from tests.tiered.metadata.log_topic_io import LogManagerMetadataTopicIO
from tierlog.log import LogConfig, LogManager, TopicPartition
from tierlog.protocol.records import scan_batches
from tierlog.tiered.metadata.topic_io import METADATA_TOPIC


def test_metadata_records_are_stamped_now_and_outlive_a_default_time_retention(
    tmp_path: Path,
) -> None:
    logs = LogManager([tmp_path / "logs"], LogConfig())
    logs.load()
    try:
        io = LogManagerMetadataTopicIO(logs)
        io.ensure_topic(1, {"retention.ms": "-1"})
        before = int(time.time() * 1000)
        io.append(0, b"key", b"value")
        after = int(time.time() * 1000)
        lg = logs.get_log(TopicPartition(METADATA_TOPIC, 0))
        assert lg is not None
        lg.roll()  # retention never deletes the active segment
        data = lg.read(0, 1 << 20, upper_bound="leo").to_bytes()
        (batch,) = scan_batches(memoryview(data))
        assert before <= batch.max_timestamp <= after
        lg.update_config(LogConfig())  # the broker defaults: retention.ms 7 days
        lg.run_retention()
        assert lg.log_start_offset == 0
        assert io.read(0, 0) == [(0, b"value")]
    finally:
        logs.shutdown()
