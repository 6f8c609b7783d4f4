"""The broker-facing adapter and plugin factory."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from rlm_helpers import make_stack

from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.protocol.records import iter_records, scan_batches
from tierlog.storage.directory import DirectoryRemoteStorageManager
from tierlog.tiered.manager.server_hooks import TieredReadHooks, build_remote_log_manager
from tierlog.tiered.metadata import RLMM_ALIASES, TopicBasedRemoteLogMetadataManager


def test_hooks_serve_fetch_and_timestamp_lookups(tmp_path: Path) -> None:
    st = make_stack(tmp_path)
    try:
        st.produce(25, per_segment=10)
        st.rlm.run_now(st.tp, "copy")
        st.log.update_config(dataclasses.replace(st.log.config, local_retention_bytes=1))
        st.log.run_retention()
        hooks = TieredReadHooks(st.rlm, lambda t, p: st.log if (t, p) == st.tp else None)

        data = asyncio.run(hooks.read(st.tp.topic, 0, 12, 1 << 20, True, "hw"))
        buf = b"".join(data.chunks)
        assert data.size == len(buf) and data.aborted_transactions is None
        assert [r.offset for h in scan_batches(buf) for r in iter_records(buf, h)] == list(
            range(12, 20)
        )
        committed = asyncio.run(hooks.read(st.tp.topic, 0, 12, 1 << 20, True, "lso"))
        assert committed.aborted_transactions == []
        assert asyncio.run(hooks.offset_for_timestamp(st.tp.topic, 0, 1003)) == (3, 1003, 0)
        with pytest.raises(KafkaError) as err:
            asyncio.run(hooks.read("nope", 0, 0, 100, True, "hw"))
        assert err.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        st.close()


def test_factory_loads_plugins_by_alias(tmp_path: Path) -> None:
    rlm = build_remote_log_manager(
        {
            "node.id": 3,
            "remote.log.storage.manager.class.name": "directory",
            "remote.log.metadata.manager.class.name": "topic",
            "remote.log.manager.task.interval.ms": 500,
            "remote.log.reader.threads": 2,
        },
        {"dir": str(tmp_path / "remote")},
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
