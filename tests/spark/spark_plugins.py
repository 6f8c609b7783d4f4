"""The object-store plugin as the Spark code loads it (by name, one per spec per process)."""

from __future__ import annotations

from tierlog.spark.segments import RsmSpec, storage_plugin
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager


def object_store(spec: RsmSpec) -> ObjectStoreRemoteStorageManager:
    rsm = storage_plugin(spec)
    assert isinstance(rsm, ObjectStoreRemoteStorageManager)
    return rsm
