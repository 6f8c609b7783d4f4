"""Optional storage capability: describing the objects a plugin keeps, for tools outside the
broker (the audit and usage jobs, the Spark source reading a bucket with no broker)."""

from __future__ import annotations

import abc
import enum
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from tierlog.tiered.api.remote_log_segment_metadata import RemoteLogSegmentMetadata


class ObjectKind(enum.Enum):
    """What one stored object of a segment holds."""

    #: The segment's record batches.
    LOG = "log"
    #: One or more of the segment's indexes.
    INDEX = "index"
    #: A self-description of the segment (see ``SupportsSegmentManifests``).
    MANIFEST = "manifest"


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One listed object: its key relative to the plugin's root and its stored size."""

    key: str
    size: int


@dataclass(frozen=True, slots=True)
class SegmentObject:
    """What a key of one of the plugin's segment objects says about it.

    ``segment_key`` is opaque: it is shared by every object of one stored copy of a segment
    and equals ``SupportsInventory.segment_key(metadata)`` for that segment's metadata, so
    callers group objects into segments and join them with the metadata by it. ``topic`` is
    the topic's name when the key holds it whole (None when the plugin shortened it).
    """

    topic_id: uuid.UUID
    partition: int
    segment_id: uuid.UUID
    kind: ObjectKind
    segment_key: str
    topic: str | None = None


class SupportsInventory(abc.ABC):
    """A ``RemoteStorageManager`` that can list what it stores and say what each object is.

    A plugin declares the capability by inheriting this class; callers check it with
    ``isinstance`` and never probe for the methods, and they never parse a key themselves:
    the layout is the plugin's alone. Without it, the audit and usage jobs refuse the plugin.

    Contract:

    * Keys are relative to the plugin's configured root (bucket prefix, directory), the same
      in every method; ``list_objects`` yields every object under that root that is not the
      plugin's own bookkeeping (including objects that are not the plugin's: a root may be
      shared), in no promised order, one page at a time, so no caller holds the whole listing.
    * ``identify`` maps a key to its segment object, or None when the key is not shaped like
      one of this plugin's segment objects (such objects are never to be deleted as orphans).
    * ``segment_key`` and ``required_keys`` say where a segment's objects are by the plugin's
      own rules (for example a location recorded at upload in the custom metadata wins over
      the current configuration); ``required_keys`` are those without which the segment
      cannot be read.
    * ``metadata_sizes`` are the stored sizes the segment metadata alone implies for objects
      of the segment, by kind (a kind missing: no expectation); ``recorded_size`` is the
      total stored size of all its objects as recorded at upload, if the plugin records it.
    * ``delete_objects`` deletes by key; a missing key counts as deleted; a key outside the
      root raises ``RemoteStorageException`` before anything is deleted.
    * Errors are the plugin's, translated as for ``RemoteStorageManager``; thread-safety too.
    """

    @abc.abstractmethod
    def location(self) -> str:
        """Where the objects are, for humans (a URL or a directory)."""

    @abc.abstractmethod
    def list_objects(self, page_size: int = 1000) -> Iterator[list[StoredObject]]:
        """Every object under the root, at most ``page_size`` per page."""

    @abc.abstractmethod
    def identify(self, key: str) -> SegmentObject | None:
        """The segment object ``key`` names, or None for a key of another shape."""

    @abc.abstractmethod
    def segment_key(self, metadata: RemoteLogSegmentMetadata) -> str:
        """The ``SegmentObject.segment_key`` of the segment's objects."""

    @abc.abstractmethod
    def required_keys(self, metadata: RemoteLogSegmentMetadata) -> list[str]:
        """The keys of the objects the segment cannot be read without."""

    @abc.abstractmethod
    def metadata_sizes(self, metadata: RemoteLogSegmentMetadata) -> Mapping[ObjectKind, int]:
        """Stored sizes the metadata implies for the segment's objects, by kind."""

    @abc.abstractmethod
    def recorded_size(self, metadata: RemoteLogSegmentMetadata) -> int | None:
        """Total stored bytes of the segment's objects recorded at upload, if known."""

    @abc.abstractmethod
    def has_object(self, key: str) -> bool:
        """Whether the object exists now (asked again, never from a listing)."""

    @abc.abstractmethod
    def delete_objects(self, keys: Sequence[str]) -> None:
        """Delete these objects; missing ones count as deleted."""
