"""``__remote_log_metadata`` for the topic-based RLMM, stored in the broker's own log engine.

The RLMM (``tierlog.tiered.metadata``) may not import the log engine, so it talks to the
topic through the abstract ``MetadataTopicIO``; this is the production adapter. Its calls come
from the RLMM's publisher and consumer threads, never from the event loop:

* appends and reads go straight to ``PartitionLog`` (thread-safe under the log's own lock);
  each append is flushed before it returns because the RLMM acts on the event right after
  (e.g. deletes remote data), and a crash must not lose an event whose effect happened;
* creating the topic must go through the broker's ``TopicManager`` (so Metadata,
  DescribeConfigs and clients such as ``tierlog remote segments`` see it), and that object
  belongs to the event loop, so ``loop_topic_creator`` hops to the loop and waits.

The topic is internal (never tiered: ``LogManager.remote_enabled_for`` excludes it), uses
the delete policy with unlimited retention, and its partition count is whatever it was
created with: ``ensure_topic`` reports the existing count and the RLMM refuses to start on a
mismatch with ``remote.log.metadata.topic.num.partitions``.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches
from tierlog.tiered.metadata import METADATA_TOPIC, MetadataTopicIO

__all__ = ["LogMetadataTopicIO", "TopicCreator", "loop_topic_creator"]

#: Creates the topic with this many partitions and these configs (or finds it existing).
TopicCreator = Callable[[int, Mapping[str, str]], None]

#: How long an RLMM thread waits for the event loop to create the topic before it gives up
#: on this attempt (the RLMM retries until its initialization timeout).
CREATE_WAIT_S = 30.0


class LogMetadataTopicIO(MetadataTopicIO):
    """``MetadataTopicIO`` over a ``LogManager``.

    Without ``create_topic`` the partitions are created directly in the log engine (tests and
    tools with no broker around); the broker passes ``loop_topic_creator``. ``on_append``
    is told the metadata partition after each append (the broker wakes waiting fetches).
    """

    def __init__(
        self,
        logs: LogManager,
        *,
        create_topic: TopicCreator | None = None,
        on_append: Callable[[int], None] | None = None,
        max_read_bytes: int = 1 << 20,
    ) -> None:
        self._logs = logs
        self._create_topic = create_topic
        self._on_append = on_append
        self._max_read_bytes = max_read_bytes
        self._lock = threading.Lock()

    def _partitions(self) -> dict[int, PartitionLog]:
        return {
            lg.tp.partition: lg for lg in self._logs.all_logs() if lg.tp.topic == METADATA_TOPIC
        }

    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        with self._lock:
            existing = self._partitions()
            if not existing:
                if self._create_topic is not None:
                    self._create_topic(num_partitions, configs)
                else:
                    self._create_logs(num_partitions, configs)
                existing = self._partitions()
                if not existing:
                    raise RuntimeError(f"{METADATA_TOPIC} was not created")
            count = max(existing) + 1
            if sorted(existing) != list(range(count)):
                raise RuntimeError(
                    f"{METADATA_TOPIC} has gaps in its partitions: {sorted(existing)}"
                )
            return count

    def _create_logs(self, num_partitions: int, configs: Mapping[str, str]) -> None:
        cfg = LogConfig(
            retention_ms=int(configs.get("retention.ms", "-1")),
            retention_bytes=int(configs.get("retention.bytes", "-1")),
            cleanup_policy=tuple(configs.get("cleanup.policy", "delete").split(",")),
            remote_storage_enable=False,
        )
        topic_id = uuid.uuid4()
        for p in range(num_partitions):
            self._logs.create_log(TopicPartition(METADATA_TOPIC, p), topic_id, cfg)

    def _log(self, partition: int) -> PartitionLog:
        lg = self._logs.get_log(TopicPartition(METADATA_TOPIC, partition))
        if lg is None:
            raise KeyError(f"{METADATA_TOPIC}-{partition} does not exist")
        return lg

    def append(self, partition: int, key: bytes | None, value: bytes) -> int:
        lg = self._log(partition)
        result = lg.append_as_leader(build_batch([SimpleRecord(value, key)]), leader_epoch=0)
        lg.flush()
        if self._on_append is not None:
            self._on_append(partition)
        return int(result.base_offset)

    def end_offset(self, partition: int) -> int:
        return self._log(partition).log_end_offset

    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        lg = self._log(partition)
        if from_offset >= lg.log_end_offset:
            return []
        data = lg.read(from_offset, self._max_read_bytes).to_bytes()
        out: list[tuple[int, bytes]] = []
        for h in scan_batches(data):
            for r in iter_records(data[h.position : h.end]):
                if r.offset >= from_offset and r.value is not None:
                    out.append((r.offset, r.value))
        return out


def loop_topic_creator(
    loop: asyncio.AbstractEventLoop, create: Callable[[int, Mapping[str, str]], Any]
) -> TopicCreator:
    """Run ``create`` (e.g. ``TopicManager.ensure`` for the metadata topic) on ``loop``.

    Called on an RLMM thread; blocks until the loop ran it. Called on the loop's own thread
    (never done by the RLMM, but harmless) it runs inline.
    """

    def run(num_partitions: int, configs: Mapping[str, str]) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            create(num_partitions, configs)
            return

        async def on_loop() -> None:
            create(num_partitions, configs)

        asyncio.run_coroutine_threadsafe(on_loop(), loop).result(CREATE_WAIT_S)

    return run
