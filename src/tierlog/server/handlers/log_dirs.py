"""DescribeLogDirs (API 35), in both modes: what each of this broker's log directories
holds, as Kafka's ``ReplicaManager.describeLogDirs`` reports it.

Per log dir: its absolute path, and per partition replica kept there its size on local disk
(the bytes of its segments; tiered data is not local; in cluster mode only the replicas
the broker is assigned), an offset lag of 0 (tierlog has no
future replicas, whose lag to the current log is what Kafka reports there) and
``is_future_key`` false; from v4, the file system's total and usable bytes. A request
naming topics gets only those partitions (unknown ones are left out, as in Kafka); null
asks for all. A directory that cannot be read answers KAFKA_STORAGE_ERROR. The walk reads
file sizes and ``statvfs``, so it runs off the event loop.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.state import BrokerState

UNKNOWN_SPACE = -1


def _index(partition: dict[str, Any]) -> int:
    return int(partition["partition_index"])


def _topic_entries(topics: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in sorted(topics):
        out.append({"name": name, "partitions": sorted(topics[name], key=_index)})
    return out


def _describe(
    log_dirs: list[Path], logs: list[Any], wanted: dict[str, set[int]] | None
) -> list[dict[str, Any]]:
    """``logs``: the replicas this broker holds."""
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {d: defaultdict(list) for d in log_dirs}
    for plog in logs:
        topic, index = plog.tp.topic, plog.tp.partition
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        topics = by_dir.get(plog.dir.parent)
        if topics is None:
            continue
        topics[topic].append(
            {
                "partition_index": index,
                "partition_size": plog.size,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    results = []
    for d, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(d)
            total, usable, error = usage.total, usage.free, ErrorCode.NONE
        except OSError:
            total, usable, error = UNKNOWN_SPACE, UNKNOWN_SPACE, ErrorCode.KAFKA_STORAGE_ERROR
        results.append(
            {
                "error_code": error,
                "log_dir": os.path.abspath(d),
                "topics": _topic_entries(topics) if error is ErrorCode.NONE else [],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return results


async def handle_describe_log_dirs(state: BrokerState, req: Request) -> Any:
    body = req.body
    wanted: dict[str, set[int]] | None = None
    if body.topics is not None:
        wanted = defaultdict(set)
        for t in body.topics:
            wanted[t.topic].update(int(p) for p in t.partitions)
    logs = state.logs.all_logs()
    repl = state.replication
    if repl is not None:
        logs = [
            plog
            for plog in logs
            if not repl.manages(plog.tp.topic) or repl.partition(*plog.tp) is not None
        ]
    results = await asyncio.to_thread(_describe, list(state.logs.log_dirs), logs, wanted)
    return mk(
        response_schema(ApiKey.DESCRIBE_LOG_DIRS, req.header.api_version),
        throttle_time=0,
        error_code=ErrorCode.NONE,
        results=results,
    )
