"""Optional plugin capabilities are declared classes, checked with isinstance; the built-in
plugins declare exactly the ones they honour, and name their own embedded defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tierlog.tiered.api import (
    RLMM_CLASS_KEY,
    RSM_ALIASES,
    RSM_CLASS_KEY,
    RemoteLogMetadataManager,
    RemoteStorageManager,
    SupportsInventory,
    SupportsMetadataTopic,
    SupportsReadAhead,
    SupportsSegmentManifests,
    plugin_class,
)
from tierlog.tiered.metadata import RLMM_ALIASES

_RSM: type[RemoteStorageManager] = RemoteStorageManager  # type: ignore[type-abstract]
_RLMM: type[RemoteLogMetadataManager] = RemoteLogMetadataManager  # type: ignore[type-abstract]


def test_storage_plugins_declare_what_they_honour() -> None:
    objectstore = plugin_class("objectstore", _RSM, RSM_ALIASES, config_key=RSM_CLASS_KEY)
    directory = plugin_class("directory", _RSM, RSM_ALIASES, config_key=RSM_CLASS_KEY)
    assert issubclass(objectstore, SupportsReadAhead)
    assert issubclass(objectstore, SupportsSegmentManifests)
    assert issubclass(objectstore, SupportsInventory)
    assert issubclass(directory, SupportsInventory)
    assert not issubclass(directory, SupportsReadAhead)
    assert not issubclass(directory, SupportsSegmentManifests)


def test_the_topic_based_metadata_manager_is_bound_to_a_metadata_topic() -> None:
    cls = plugin_class("topic", _RLMM, RLMM_ALIASES, config_key=RLMM_CLASS_KEY)
    assert issubclass(cls, SupportsMetadataTopic)


def test_every_alias_names_a_storage_plugin() -> None:
    for alias in RSM_ALIASES:
        assert issubclass(plugin_class(alias, _RSM, RSM_ALIASES, config_key=RSM_CLASS_KEY), _RSM)


def test_embedded_defaults_are_the_plugins_own(tmp_path: Path) -> None:
    dirs = [tmp_path / "data", tmp_path / "other"]
    root = tmp_path / "data-remote"
    objectstore = plugin_class("objectstore", _RSM, RSM_ALIASES, config_key=RSM_CLASS_KEY)
    directory = plugin_class("directory", _RSM, RSM_ALIASES, config_key=RSM_CLASS_KEY)
    assert objectstore.default_config(dirs) == {"storage.url": root.absolute().as_uri()}
    assert directory.default_config(dirs) == {"dir": str(root)}
    assert RemoteStorageManager.default_config(dirs) == {}  # a plugin that names none


def test_the_alias_table_loads_no_plugin() -> None:
    code = (
        "import sys, tierlog.tiered.api, tierlog.storage; "
        "assert not [m for m in sys.modules if m.startswith('tierlog.storage.')], sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
