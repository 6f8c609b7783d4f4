"""Errors that cross the plugin boundary; the exception type tells the caller what to do."""

from __future__ import annotations


class RemoteStorageException(Exception):
    """A remote-tier operation failed and retrying as-is is not expected to help.

    The RemoteLogManager abandons the current attempt (the segment stays in its current state
    and the next task run starts over with a fresh segment id).
    """


class RetriableRemoteStorageException(RemoteStorageException):
    """A transient failure (throttling, timeout, unreachable store): the same call may succeed
    if retried later."""


class RemoteResourceNotFoundException(RemoteStorageException):
    """The named segment, index or partition does not exist in the remote tier or metadata.

    Deleting something that is already gone must not raise this: deletes are idempotent.
    """


class ReplicaNotAvailableException(RetriableRemoteStorageException):
    """The metadata of this partition is assigned but still being loaded; ask again later.

    Mirrors Kafka's ``ReplicaNotAvailableException`` so the server can answer with the
    retriable ``REPLICA_NOT_AVAILABLE`` error code.
    """


class CustomMetadataSizeLimitExceededException(Exception):
    """The custom metadata returned by the storage plugin is larger than
    ``remote.log.metadata.custom.metadata.max.bytes``.

    Not a storage failure: the copied data is deleted and copying for the partition stops, as
    in Kafka, because retrying would produce the same oversized metadata.
    """
