"""The plugin factory, and the manager calls the broker's Fetch and ListOffsets make."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from rlm_helpers import make_stack

from tierlog.config import load_broker_config
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.storage.directory import DirectoryRemoteStorageManager
from tierlog.tiered.manager import RemoteFetchRequest, RemoteLogManagerConfig
from tierlog.tiered.manager.server_hooks import build_remote_log_manager
from tierlog.tiered.metadata import RLMM_ALIASES, TopicBasedRemoteLogMetadataManager


def test_remote_reads_serve_fetch_and_timestamp_lookups(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(25, per_segment=10)
        st.rlm.run_now(st.tp, "copy")
        st.log.update_config(dataclasses.replace(st.log.config, local_retention_bytes=1))
        st.log.run_retention()

        (res,) = asyncio.run(
            st.rlm.read_remote([RemoteFetchRequest(st.log, 12, 1 << 20, True, False)], 1 << 20)
        )
        buf = bytes(res.records)
        assert res.error is ErrorCode.NONE and res.aborted_transactions is None
        assert [r.offset for h in scan_batches(buf) for r in iter_records(buf, h)] == list(
            range(12, 20)
        )
        (committed,) = asyncio.run(
            st.rlm.read_remote([RemoteFetchRequest(st.log, 12, 1 << 20, True, True)], 1 << 20)
        )
        assert committed.aborted_transactions == []
        assert asyncio.run(st.rlm.offset_for_timestamp(st.log, 1003)) == (3, 1003, 0)
    finally:
        st.close()


def test_factory_loads_plugins_by_alias(tmp_path: Path) -> None:
    broker = load_broker_config(
        {
            "node.id": "3",
            "remote.log.manager.task.interval.ms": "500",
            "remote.log.reader.threads": "2",
        }
    )
    rlm = build_remote_log_manager(
        RemoteLogManagerConfig.from_broker_config(broker),
        "directory",
        {"dir": str(tmp_path / "remote")},
        "topic",
        {"remote.log.metadata.snapshot.enable": "false"},
        tmp_path / "logs",
        rlmm_aliases=RLMM_ALIASES,
    )
    try:
        assert isinstance(rlm.rsm, DirectoryRemoteStorageManager)
        assert rlm.rsm.broker_id == 3
        assert isinstance(rlm.rlmm, TopicBasedRemoteLogMetadataManager)
        assert rlm.config.broker_id == 3 and rlm.config.task_interval_ms == 500
        assert rlm.config.reader_threads == 2
    finally:
        rlm.close()
