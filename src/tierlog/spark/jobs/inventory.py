"""What a storage plugin keeps, seen from outside: objects, which segment each belongs to,
which objects a segment must have, and how big they should be.

The audit and usage jobs compare this with the remote log metadata. Two plugins know how
to describe themselves here: the object store (three objects per segment, a manifest that
records the stored sizes) and the directory plugin (a fileset per segment, the `.log`
file as large as the segment). Anything else is refused with a message naming the plugin.
Objects are named by key relative to the plugin's root, the same key `delete` takes.
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tierlog.spark.bucket import ListedObject, list_bucket, object_store
from tierlog.spark.options import OptionError
from tierlog.spark.segments import RsmSpec
from tierlog.tiered.api import RemoteLogSegmentMetadata

OBJECTSTORE = "tierlog.storage.objectstore:ObjectStoreRemoteStorageManager"
DIRECTORY = "tierlog.storage.directory:DirectoryRemoteStorageManager"

_OBJECTSTORE_SUFFIXES = (".rsm-manifest", ".indexes", ".log")
_DIRECTORY_REQUIRED = (".log", ".index", ".timeindex")

_ID = r"[A-Za-z0-9_-]{22}"  # a Kafka Uuid as Uuid.toString() renders it
#: ``[<hash>/]<topic>-<topicId>/<partition>/<20-digit offset>-<segmentId>.<suffix>``
_OBJECTSTORE_KEY = re.compile(
    rf"(?:^|/)[^/]+-(?P<tid>{_ID})/\d+/\d{{20}}-{_ID}\.(?:log|indexes|rsm-manifest)$"
)
#: ``<topic>-<partition>-<topicId>/<20-digit offset>-<segmentId>.<extension>``
_DIRECTORY_KEY = re.compile(rf"^[^/]+-\d+-(?P<tid>{_ID})/\d{{20}}-{_ID}\.[a-z_-]+$")


def _topic_id(match: re.Match[str] | None) -> str | None:
    if match is None:
        return None
    raw = match.group("tid")
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "==")))


@dataclass(frozen=True)
class ManifestInfo:
    """Stored sizes a manifest promises for its `.log` and `.indexes` objects."""

    log_size: int
    indexes_size: int


@dataclass(frozen=True)
class Inventory:
    """Picklable: executors rebuild the plugin from `spec`."""

    spec: RsmSpec
    kind: str  # "objectstore" | "directory"

    @classmethod
    def of(cls, spec: RsmSpec) -> Inventory:
        from tierlog.tiered.api import RSM_ALIASES

        target = RSM_ALIASES.get(spec.class_name, spec.class_name)
        if target == OBJECTSTORE:
            return cls(spec, "objectstore")
        if target == DIRECTORY:
            if not dict(spec.props).get("dir"):
                raise OptionError("the directory plugin's rsm.config.dir is not known")
            return cls(spec, "directory")
        raise OptionError(
            f"storage plugin {spec.class_name!r} cannot be audited: only the objectstore and "
            "directory plugins describe their objects"
        )

    @property
    def _root(self) -> Path:
        return Path(dict(self.spec.props)["dir"])

    def describe(self) -> str:
        props = dict(self.spec.props)
        return props.get("storage.url") or props.get("dir") or self.spec.class_name

    def listing(self) -> list[ListedObject]:
        """Every segment object the plugin holds (not its own bookkeeping files)."""
        if self.kind == "objectstore":
            return list_bucket(object_store(self.spec))
        out: list[ListedObject] = []
        root = self._root
        if not root.is_dir():
            return out
        for d in sorted(os.scandir(root), key=lambda e: e.name):
            if not d.is_dir():
                continue
            for f in sorted(os.scandir(d.path), key=lambda e: e.name):
                if f.is_file() and not f.name.endswith(".tmp"):
                    out.append(ListedObject(f"{d.name}/{f.name}", f.stat().st_size))
        return out

    def segment_base(self, key: str) -> str:
        """The part of a key shared by all objects of one segment."""
        if self.kind == "objectstore":
            for suffix in _OBJECTSTORE_SUFFIXES:
                if key.endswith(suffix):
                    return key[: -len(suffix)]
            return key
        head, _, name = key.rpartition("/")
        return f"{head}/{name.split('.', 1)[0]}"

    def topic_id_of(self, key: str) -> str | None:
        """The topic id (as the metadata renders it) a segment object belongs to; None when
        the key is not shaped like one of this plugin's segment objects. The audit may only
        call an object an orphan when it is one of ours: a bucket or prefix can be shared
        with other data or with another cluster, whose objects no metadata here describes."""
        pattern = _OBJECTSTORE_KEY if self.kind == "objectstore" else _DIRECTORY_KEY
        return _topic_id(pattern.search(key))

    def base_of(self, md: RemoteLogSegmentMetadata) -> str:
        if self.kind == "objectstore":
            return object_store(self.spec).keys_for(md).base
        from tierlog.storage.directory import fileset_prefix, partition_dir_name

        return f"{partition_dir_name(md.topic_id_partition)}/{fileset_prefix(md)}"

    def required_keys(self, md: RemoteLogSegmentMetadata) -> list[str]:
        """Objects without which the segment cannot be read."""
        base = self.base_of(md)
        suffixes = _OBJECTSTORE_SUFFIXES if self.kind == "objectstore" else _DIRECTORY_REQUIRED
        return [base + s for s in suffixes]

    def stored_size(self, md: RemoteLogSegmentMetadata) -> int | None:
        """Total stored bytes recorded at upload (object store custom metadata), if any."""
        if self.kind != "objectstore" or md.custom_metadata is None:
            return None
        from tierlog.storage.objectstore.custom_metadata import SegmentLocation

        try:
            return SegmentLocation.decode(md.custom_metadata.value).stored_size
        except ValueError:
            return None

    def is_manifest(self, key: str) -> bool:
        return self.kind == "objectstore" and key.endswith(".rsm-manifest")

    def read_manifest(self, key: str) -> ManifestInfo:
        """Raises on a manifest that cannot be fetched or parsed."""
        from tierlog.storage.objectstore.manifest import SegmentManifest

        rsm = object_store(self.spec)
        m = SegmentManifest.from_json_bytes(rsm.backend.get(key, "manifest"))
        return ManifestInfo(m.chunk_index.stored_size, m.indexes_stored_size)

    def exists(self, key: str) -> bool:
        if self.kind == "objectstore":
            return object_store(self.spec).backend.head(key) is not None
        return (self._root / key).is_file()

    def delete(self, keys: Iterable[str], progress: Callable[[int], None]) -> None:
        """Delete objects by key (a missing one counts as deleted), reporting each step."""
        batch: list[str] = []
        if self.kind == "objectstore":
            rsm = object_store(self.spec)
            for key in keys:
                batch.append(key)
                if len(batch) == 100:
                    rsm.backend.delete_many(batch)
                    progress(len(batch))
                    batch = []
            if batch:
                rsm.backend.delete_many(batch)
                progress(len(batch))
            return
        root = self._root
        for key in keys:
            path = root / key
            if root.resolve() not in path.resolve().parents:
                raise OptionError(f"refusing to delete {key!r}: outside {root}")
            path.unlink(missing_ok=True)
            progress(1)
