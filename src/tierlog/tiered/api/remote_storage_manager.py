"""The storage plugin interface: moves segment bytes to and from the remote tier."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from tierlog.tiered.api.custom_metadata import CustomMetadata
from tierlog.tiered.api.index_type import IndexType
from tierlog.tiered.api.log_segment_data import LogSegmentData
from tierlog.tiered.api.remote_log_segment_metadata import RemoteLogSegmentMetadata


class RemoteStorageManager(abc.ABC):
    """Contract every storage plugin must honour.

    Threading: every method is synchronous and blocking. The RemoteLogManager calls them from
    its own worker thread pools (copier, expiration, reader), never from the asyncio loop, and
    may call them concurrently for different segments. Implementations must be thread-safe
    and may block on network I/O freely.

    Errors: raise ``RetriableRemoteStorageException`` for transient failures (the caller
    retries later), ``RemoteResourceNotFoundException`` when a fetched segment or index does
    not exist, and ``RemoteStorageException`` for anything else. Any other exception type is
    treated like ``RemoteStorageException``.

    Idempotence: ``copy_log_segment_data`` and ``delete_log_segment_data`` may be invoked
    more than once for the same ``RemoteLogSegmentId`` (retries, leader failover). Copying
    again overwrites; deleting a segment that is partly or wholly absent succeeds.
    Objects are named by the segment id, which is unique per copy attempt, so two attempts
    for the same offsets never collide.

    Lifecycle: the plugin is instantiated with no arguments, ``configure`` is called once with
    the ``rsm.config.``-prefixed broker properties (prefix stripped) before any other call,
    and ``close`` once at shutdown.
    """

    @classmethod
    def config_is_sensitive(cls, key: str) -> bool:
        """Whether the plugin setting ``key`` (``rsm.config.`` prefix stripped) may hold a
        secret, so that DescribeConfigs hides its value.

        The broker asks the configured class without instantiating it. The default hides
        everything, which is the only safe answer for a plugin that does not say; plugins
        override it so that non-secret settings (where the data lives, chunking, which
        transforms are on) can be discovered by clients such as the Spark source.
        """
        return True

    @classmethod
    def default_config(cls, log_dirs: Sequence[Path]) -> Mapping[str, str]:
        """Settings (``rsm.config.`` prefix stripped) the plugin takes on a broker that
        configures none of them, derived from what every broker has: its log dirs.

        The broker asks the configured class without instantiating it, passes these under
        its explicit settings (an explicit one always wins), and describes them as defaults
        (DescribeConfigs), so clients such as the Spark source find the data too. The
        default is none: the plugin's ``configure`` then sees only what was configured.
        """
        return {}

    @abc.abstractmethod
    def configure(self, props: Mapping[str, str]) -> None:
        """Receive plugin settings before first use."""

    @abc.abstractmethod
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> CustomMetadata | None:
        """Copy the segment and all its indexes; return plugin metadata to be stored with the
        segment (or None).

        Must either copy everything or raise: a partial copy is cleaned up by the caller
        through ``delete_log_segment_data`` on the same metadata.
        """

    @abc.abstractmethod
    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        """Return a stream over the segment's bytes from ``start_position`` to
        ``end_position`` inclusive (to the end of the segment when None).

        Positions are byte positions in the ``.log`` file, not offsets. The stream should be
        lazy (not buffer the whole segment) because readers usually stop after one fetch's
        worth of batches; the caller closes it. A missing segment raises
        ``RemoteResourceNotFoundException``.
        """

    @abc.abstractmethod
    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        """Return a stream over one index of the segment; the caller closes it.

        A missing index (including ``TRANSACTION`` for a segment copied without one) raises
        ``RemoteResourceNotFoundException``.
        """

    @abc.abstractmethod
    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete the segment and every index of it. Idempotent: succeeds when some or all
        of the objects are already gone."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release clients and pools; no other call follows."""
