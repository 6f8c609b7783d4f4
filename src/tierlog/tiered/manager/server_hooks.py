"""Glue between the broker and the RemoteLogManager.

``build_remote_log_manager`` loads the two plugins (short aliases or ``module:Class``) and
builds the manager from its typed settings; the broker still binds the topic-based RLMM to
``__remote_log_metadata`` and reports leadership, config changes and topic deletions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tierlog.tiered.api.plugin import (
    RLMM_PROPS_PREFIX,
    RSM_ALIASES,
    RSM_PROPS_PREFIX,
    load_remote_log_metadata_manager,
    load_remote_storage_manager,
)
from tierlog.tiered.manager.config import RemoteLogManagerConfig
from tierlog.tiered.manager.manager import RemoteLogManager
from tierlog.tiered.manager.metrics import RemoteMetrics

__all__ = ["build_remote_log_manager"]


def build_remote_log_manager(
    config: RemoteLogManagerConfig,
    rsm_class: str,
    rsm_props: Mapping[str, str],
    rlmm_class: str,
    rlmm_props: Mapping[str, str],
    log_dir: Path,
    *,
    rlmm_aliases: Mapping[str, str],
    metrics: RemoteMetrics | None = None,
) -> RemoteLogManager:
    """Load and configure both plugins and build the (not yet started) manager.

    ``rsm_class`` / ``rlmm_class`` are an alias or ``module:Class``; ``rsm_props`` /
    ``rlmm_props`` are the prefix-stripped plugin properties. ``broker.id`` is added to both
    and ``log.dir`` to the RLMM's, as Kafka does.
    """
    common = {"broker.id": str(config.broker_id)}
    rsm = load_remote_storage_manager(
        rsm_class,
        RSM_ALIASES,
        {RSM_PROPS_PREFIX + k: v for k, v in {**common, **rsm_props}.items()},
    )
    rlmm_all = {**common, "log.dir": str(log_dir), **rlmm_props}
    rlmm = load_remote_log_metadata_manager(
        rlmm_class,
        rlmm_aliases,
        {RLMM_PROPS_PREFIX + k: v for k, v in rlmm_all.items()},
    )
    return RemoteLogManager(config, rsm, rlmm, log_dir, metrics=metrics)
