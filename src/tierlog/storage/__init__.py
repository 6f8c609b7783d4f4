"""Storage plugins (RemoteStorageManager implementations).

Importing this package must not import any plugin: the broker resolves plugins by name
through ``RSM_ALIASES`` and ``tierlog.tiered.api.load_plugin``, so a broker configured
with the directory plugin never loads the object-store client libraries.
"""

from __future__ import annotations

RSM_ALIASES: dict[str, str] = {
    "directory": "tierlog.storage.directory:DirectoryRemoteStorageManager",
    "objectstore": "tierlog.storage.objectstore:ObjectStoreRemoteStorageManager",
}

__all__ = ["RSM_ALIASES"]
