"""Object-store RemoteStorageManager: S3, GCS, Azure Blob and local files via obstore."""

from tierlog.storage.objectstore.rsm import ObjectStoreRemoteStorageManager

__all__ = ["ObjectStoreRemoteStorageManager"]
