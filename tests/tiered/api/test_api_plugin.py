"""Plugin loading by alias and by ``module:Class``, using a real module on disk."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tierlog.tiered.api import (
    PluginLoadError,
    RemoteLogMetadataManager,
    RemoteStorageManager,
    load_plugin,
    load_remote_log_metadata_manager,
    load_remote_storage_manager,
)

PLUGIN_SOURCE = textwrap.dedent(
    """
    from tierlog.tiered.api import RemoteStorageManager

    class RecordingRSM(RemoteStorageManager):
        def __init__(self):
            self.props = None
        def configure(self, props):
            self.props = dict(props)
        def copy_log_segment_data(self, metadata, data):
            return None
        def fetch_log_segment(self, metadata, start_position, end_position=None):
            raise NotImplementedError
        def fetch_index(self, metadata, index_type):
            raise NotImplementedError
        def delete_log_segment_data(self, metadata):
            pass
        def close(self):
            pass

    class NotAPlugin:
        def configure(self, props):
            pass
    """
)

# mypy rejects abstract classes for type[T]; the plugin loader takes them on purpose.
RSM_BASE: type[RemoteStorageManager] = RemoteStorageManager  # type: ignore[type-abstract]
RLMM_BASE: type[RemoteLogMetadataManager] = RemoteLogMetadataManager  # type: ignore[type-abstract]

PROPS = {
    "rsm.config.dir": "/data/remote",
    "rsm.config.chunk.size": "4096",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
    "broker.id": "1",
}


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "tierlog_test_plugins_mod.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "tierlog_test_plugins_mod"


def test_module_class_path_is_loaded_and_gets_stripped_props(plugin_module: str) -> None:
    rsm = load_plugin(f"{plugin_module}:RecordingRSM", RSM_BASE, {}, PROPS, "rsm.config.")
    assert type(rsm).__name__ == "RecordingRSM"
    assert rsm.props == {"dir": "/data/remote", "chunk.size": "4096"}  # type: ignore[attr-defined]


def test_alias_is_resolved(plugin_module: str) -> None:
    aliases = {"recording": f"{plugin_module}:RecordingRSM"}
    rsm = load_plugin("recording", RSM_BASE, aliases, PROPS, "rsm.config.")
    assert type(rsm).__name__ == "RecordingRSM"


def test_unknown_alias_names_the_config_key() -> None:
    with pytest.raises(PluginLoadError, match=r"remote\.log\.storage\.manager\.class\.name"):
        load_plugin("nope", RSM_BASE, {"directory": "x:Y"}, PROPS, "rsm.config.")


def test_unimportable_module_names_the_config_key() -> None:
    with pytest.raises(PluginLoadError, match=r"remote\.log\.metadata\.manager\.class\.name"):
        load_plugin("no_such_module_xyz:Cls", RLMM_BASE, {}, PROPS, "rlmm.config.")


def test_missing_class_is_reported(plugin_module: str) -> None:
    with pytest.raises(PluginLoadError, match="has no class 'Missing'"):
        load_plugin(f"{plugin_module}:Missing", RSM_BASE, {}, PROPS, "rsm.config.")


def test_class_of_wrong_kind_is_rejected(plugin_module: str) -> None:
    with pytest.raises(PluginLoadError, match="not a subclass of RemoteStorageManager"):
        load_plugin(f"{plugin_module}:NotAPlugin", RSM_BASE, {}, PROPS, "rsm.config.")


def test_rsm_that_is_not_an_rlmm_is_rejected(plugin_module: str) -> None:
    with pytest.raises(PluginLoadError, match="not a subclass of RemoteLogMetadataManager"):
        load_plugin(f"{plugin_module}:RecordingRSM", RLMM_BASE, {}, PROPS, "rlmm.config.")


def test_typed_wrappers_use_the_standard_prefixes(plugin_module: str) -> None:
    rsm = load_remote_storage_manager(f"{plugin_module}:RecordingRSM", {}, PROPS)
    assert rsm.props == {"dir": "/data/remote", "chunk.size": "4096"}  # type: ignore[attr-defined]
    with pytest.raises(PluginLoadError, match=r"remote\.log\.metadata\.manager\.class\.name"):
        load_remote_log_metadata_manager(f"{plugin_module}:RecordingRSM", {}, PROPS)
