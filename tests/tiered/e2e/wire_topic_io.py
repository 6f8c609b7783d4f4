"""``MetadataTopicIO`` over the Kafka wire protocol, so a topic-based RLMM in the test process
keeps its metadata in a real ``tierlog serve`` (CreateTopics, Produce acks=all, ListOffsets,
Fetch through our own codec). One connection per calling thread: the RLMM appends from its
publisher thread while its consumer thread reads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import SimpleRecord, build_batch, iter_records, scan_batches
from tierlog.tiered.metadata import METADATA_TOPIC, MetadataTopicIO

FETCH_BYTES = 1 << 20


class WireMetadataTopicIO(MetadataTopicIO):
    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._local = threading.local()
        self._clients: list[WireConnection] = []
        self._lock = threading.Lock()

    def _client(self) -> WireConnection:
        c: WireConnection | None = getattr(self._local, "client", None)
        if c is None:
            c = WireConnection.to_bootstrap(self._bootstrap, timeout_s=10)
            self._local.client = c
            with self._lock:
                self._clients.append(c)
        return c

    def close(self) -> None:
        with self._lock:
            for c in self._clients:
                c.close()
            self._clients.clear()

    def _partition_count(self) -> int:
        md = self._client().call(
            ApiKey.METADATA, 12, topics=[{"name": METADATA_TOPIC}], allow_auto_topic_creation=False
        )
        t = md.topics[0]
        return len(t.partitions) if t.error_code == 0 else 0

    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        count = self._partition_count()
        if count:
            return count
        r = self._client().call(
            ApiKey.CREATE_TOPICS,
            5,
            topics=[
                {
                    "name": METADATA_TOPIC,
                    "num_partitions": num_partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            timeout=30_000,
            validate_only=False,
        )
        code = int(r.topics[0].error_code)
        if code not in (0, int(ErrorCode.TOPIC_ALREADY_EXISTS)):
            raise RuntimeError(f"create {METADATA_TOPIC}: {ErrorCode(code).name}")
        return self._partition_count()

    def append(self, partition: int, key: bytes | None, value: bytes) -> int:
        r = self._client().call(
            ApiKey.PRODUCE,
            9,
            transactional_id=None,
            acks=-1,
            timeout=30_000,
            topic_data=[
                {
                    "name": METADATA_TOPIC,
                    "partition_data": [
                        {"index": partition, "records": build_batch([SimpleRecord(value, key)])}
                    ],
                }
            ],
        )
        p = r.responses[0].partition_responses[0]
        if p.error_code != 0:
            raise RuntimeError(f"produce: {ErrorCode(int(p.error_code)).name}")
        return int(p.base_offset)

    def end_offset(self, partition: int) -> int:
        r = self._client().list_offset(METADATA_TOPIC, partition, -1, version=7)
        if r.error_code != 0:
            raise RuntimeError(f"list offsets: {ErrorCode(r.error_code).name}")
        return r.offset

    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        code, data = self._client().fetch_raw(METADATA_TOPIC, partition, from_offset, FETCH_BYTES)
        if code != 0:
            raise RuntimeError(f"fetch: {ErrorCode(code).name}")
        out: list[tuple[int, bytes]] = []
        for h in scan_batches(data):
            for rec in iter_records(data[h.position : h.end]):
                if rec.offset >= from_offset and rec.value is not None:
                    out.append((rec.offset, rec.value))
        return out
