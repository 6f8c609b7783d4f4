"""Optional storage capability: segments that describe themselves in an object of their own."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass

from tierlog.tiered.api.inventory import ObjectKind, SupportsInventory
from tierlog.tiered.api.remote_log_segment_metadata import RemoteLogSegmentMetadata


@dataclass(frozen=True)
class ManifestContents:
    """A manifest as far as tools outside the plugin need it: the segment's metadata as it
    was at upload, and the stored sizes it records for the segment's other objects, by kind."""

    metadata: RemoteLogSegmentMetadata
    sizes: Mapping[ObjectKind, int]


class SupportsSegmentManifests(SupportsInventory):
    """An inventory whose every segment has a ``MANIFEST`` object, written last, from which
    the segment's metadata can be rebuilt with no metadata log at all (for example to read a
    bucket while the broker is down).

    A plugin declares the capability by inheriting this class (and with it
    ``SupportsInventory``); callers check it with ``isinstance``.

    Contract:

    * A manifest exists only once every other object of its segment was stored, so a listed
      manifest names a complete, readable segment (unless it is being deleted meanwhile).
    * ``read_manifest`` fetches and parses one; it raises when the object cannot be fetched
      or parsed. The manifest's own stored size is what ``recorded_size`` of its segment
      leaves after the ``sizes`` it records.
    * ``found_at`` returns the metadata pointed at the objects where the manifest was found
      (``stored_size``: the listed bytes of the segment's objects), so that fetching through
      it reads those objects whatever the plugin's current configuration says.
    """

    @abc.abstractmethod
    def read_manifest(self, key: str) -> ManifestContents:
        """The manifest stored under ``key``."""

    @abc.abstractmethod
    def found_at(
        self, metadata: RemoteLogSegmentMetadata, manifest_key: str, stored_size: int
    ) -> RemoteLogSegmentMetadata:
        """``metadata`` made to fetch from where ``manifest_key`` was listed."""
