"""Resolve a configured plugin class name to a configured instance.

Kept in the API package so the broker never imports a concrete plugin: the class is named
by a short alias or by ``package.module:Class``. ``RSM_ALIASES`` is the one table of the
storage plugins' short names; it holds strings only, so importing it loads no plugin.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Protocol, TypeVar

from tierlog.tiered.api.remote_log_metadata_manager import RemoteLogMetadataManager
from tierlog.tiered.api.remote_storage_manager import RemoteStorageManager

RSM_PROPS_PREFIX = "rsm.config."
RLMM_PROPS_PREFIX = "rlmm.config."
RSM_CLASS_KEY = "remote.log.storage.manager.class.name"
RLMM_CLASS_KEY = "remote.log.metadata.manager.class.name"

#: Short names accepted for ``remote.log.storage.manager.class.name`` (and wherever a storage
#: plugin is named, e.g. the Spark jobs' ``tierlog.rsm.class``).
RSM_ALIASES: Mapping[str, str] = {
    "directory": "tierlog.storage.directory:DirectoryRemoteStorageManager",
    "DirectoryRemoteStorageManager": "tierlog.storage.directory:DirectoryRemoteStorageManager",
    "objectstore": "tierlog.storage.objectstore:ObjectStoreRemoteStorageManager",
}

_KEY_FOR_PREFIX = {RSM_PROPS_PREFIX: RSM_CLASS_KEY, RLMM_PROPS_PREFIX: RLMM_CLASS_KEY}


class Configurable(Protocol):
    def configure(self, props: Mapping[str, str]) -> None: ...


T = TypeVar("T", bound=Configurable)


class PluginLoadError(ValueError):
    """The configured plugin class cannot be used; the message names the config key."""


def plugin_props(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The properties starting with ``prefix``, with the prefix stripped."""
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def load_plugin(
    name_or_path: str,
    base: type[T],
    aliases: Mapping[str, str],
    props: Mapping[str, str],
    prefix: str,
    *,
    config_key: str | None = None,
) -> T:
    """Instantiate the plugin (no-argument constructor) and ``configure`` it with the
    ``prefix`` properties, prefix stripped.

    mypy rejects an abstract ``base`` for ``type[T]``; prefer the typed wrappers below.

    ``config_key`` is only used in error messages; by default it is derived from ``prefix``.
    """
    key = config_key or _KEY_FOR_PREFIX.get(prefix, prefix + "class.name")
    cls = plugin_class(name_or_path, base, aliases, config_key=key)
    instance: T = cls()
    instance.configure(plugin_props(props, prefix))
    return instance


def plugin_class(
    name_or_path: str, base: type[T], aliases: Mapping[str, str], *, config_key: str
) -> type[T]:
    """The plugin class named by alias or ``module:Class``, imported but not instantiated
    (e.g. to ask a storage plugin which of its settings are secret)."""
    key = config_key
    target = aliases.get(name_or_path, name_or_path)
    module_name, sep, class_name = target.partition(":")
    if not sep or not module_name or not class_name:
        known = ", ".join(sorted(aliases)) or "none"
        raise PluginLoadError(
            f"{key}={name_or_path!r} is neither a known alias ({known}) nor 'module:Class'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise PluginLoadError(f"{key}={name_or_path!r}: cannot import {module_name!r}: {e}") from e
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise PluginLoadError(f"{key}={name_or_path!r}: {module_name} has no class {class_name!r}")
    if not issubclass(cls, base):
        raise PluginLoadError(
            f"{key}={name_or_path!r}: {target} is not a subclass of {base.__name__}"
        )
    return cls


def load_remote_storage_manager(
    name_or_path: str, aliases: Mapping[str, str], props: Mapping[str, str]
) -> RemoteStorageManager:
    """``load_plugin`` for ``remote.log.storage.manager.class.name`` (``rsm.config.``)."""
    base: type[RemoteStorageManager] = RemoteStorageManager  # type: ignore[type-abstract]
    return load_plugin(name_or_path, base, aliases, props, RSM_PROPS_PREFIX)


def load_remote_log_metadata_manager(
    name_or_path: str, aliases: Mapping[str, str], props: Mapping[str, str]
) -> RemoteLogMetadataManager:
    """``load_plugin`` for ``remote.log.metadata.manager.class.name`` (``rlmm.config.``)."""
    base: type[RemoteLogMetadataManager] = RemoteLogMetadataManager  # type: ignore[type-abstract]
    return load_plugin(name_or_path, base, aliases, props, RLMM_PROPS_PREFIX)
