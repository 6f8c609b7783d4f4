"""A RemoteStorageManager over a local directory (alias ``directory``), like Kafka's
LocalTieredStorage.

It is the test double for the whole tiering stack and the embedded default, so it records
exactly what the broker asked of it:

* an in-process, per-instance event log (``COPY``, ``FETCH``, ``FETCH_INDEX``, ``DELETE``)
  with a monotonic sequence number and latch-style waiting (``wait_for``);
* the same events appended as JSON lines to ``<dir>/events-<broker_id>.jsonl``, because in
  integration tests the broker is a subprocess and the test reads that file
  (``read_events``);
* fault injection, either in-process (``inject_faults``) or through the control file
  ``<dir>/faults.json`` (``write_faults``) which is re-read before each operation:
  ``fail_copy`` / ``fail_delete`` count down failures, ``custom_metadata_bytes`` makes every
  copy return custom metadata of that size.

Layout: one directory per partition, ``<topic>-<partition>-<topicId base64url>``, holding a
fileset per segment named ``<20-digit start offset>-<segment uuid base64url><suffix>``.

Properties (``rsm.config.`` prefix stripped): ``dir`` (root; on a broker ``<first log
dir>-remote`` unless configured, elsewhere a temp dir if absent),
``broker.id``, ``delete.enable`` (default true; false makes deletes silent no-ops that emit
no event), ``fail.copy.count``, ``fail.delete.count``, ``custom.metadata.bytes``.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

from tierlog.storage.embedded import embedded_root
from tierlog.tiered.api import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    ObjectKind,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RemoteStorageManager,
    SegmentObject,
    StoredObject,
    SupportsInventory,
    TopicIdPartition,
)

__all__ = [
    "DirectoryRemoteStorageManager",
    "StorageEvent",
    "read_events",
    "write_faults",
]

COPY = "COPY"
FETCH = "FETCH"
FETCH_INDEX = "FETCH_INDEX"
DELETE = "DELETE"

FAULTS_FILE = "faults.json"

_SUFFIX: dict[str | IndexType, str] = {
    "log": ".log",
    IndexType.OFFSET: ".index",
    IndexType.TIMESTAMP: ".timeindex",
    IndexType.TRANSACTION: ".txnindex",
    IndexType.LEADER_EPOCH: ".leader_epoch_checkpoint",
    IndexType.PRODUCER_SNAPSHOT: ".snapshot",
}


#: Files a segment cannot be read without.
_REQUIRED: tuple[str | IndexType, ...] = ("log", IndexType.OFFSET, IndexType.TIMESTAMP)
_ID = r"[A-Za-z0-9_-]{22}"  # a Uuid rendered by ``_b64``
#: ``<topic>-<partition>-<topicId>/<20-digit offset>-<segmentId><suffix>``
_SEGMENT_KEY = re.compile(
    rf"^(?P<topic>[^/]+)-(?P<partition>\d+)-(?P<tid>{_ID})/\d{{20}}-(?P<sid>{_ID})"
    r"(?P<suffix>\.[a-z_]+)$"
)
_KIND_OF_SUFFIX = {
    suffix: ObjectKind.LOG if kind == "log" else ObjectKind.INDEX
    for kind, suffix in _SUFFIX.items()
}


@dataclass(frozen=True)
class StorageEvent:
    seq: int
    type: str
    broker_id: int
    topic: str
    partition: int
    topic_id: str
    segment_id: str
    start_offset: int
    end_offset: int
    index_type: str | None = None
    failed: bool = False
    error: str | None = None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def partition_dir_name(tip: TopicIdPartition) -> str:
    return f"{tip.topic}-{tip.partition}-{_b64(tip.topic_id.bytes)}"


def fileset_prefix(md: RemoteLogSegmentMetadata) -> str:
    return f"{md.start_offset:020d}-{_b64(md.remote_log_segment_id.id.bytes)}"


def _uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def read_events(root: Path | str, broker_id: int = 0) -> list[StorageEvent]:
    """Events a (possibly other-process) instance wrote to ``<root>/events-<id>.jsonl``."""
    path = Path(root) / f"events-{broker_id}.jsonl"
    if not path.exists():
        return []
    out: list[StorageEvent] = []
    for line in path.read_text().splitlines():
        if line.endswith("}"):
            out.append(StorageEvent(**json.loads(line)))
    return out


def write_faults(
    root: Path | str,
    *,
    fail_copy: int = 0,
    fail_delete: int = 0,
    custom_metadata_bytes: int = 0,
) -> None:
    """Arm faults for every instance over ``root``, including one in another process."""
    data = {
        "fail_copy": fail_copy,
        "fail_delete": fail_delete,
        "custom_metadata_bytes": custom_metadata_bytes,
    }
    _atomic_write(Path(root) / FAULTS_FILE, json.dumps(data).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class DirectoryRemoteStorageManager(RemoteStorageManager, SupportsInventory):
    """Thread-safe: file operations touch distinct filesets; shared state is under a lock."""

    _instances: ClassVar[list[DirectoryRemoteStorageManager]] = []
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.root = Path()
        self.broker_id = 0
        self._delete_enabled = True
        self._lock = threading.Condition()
        self._events: list[StorageEvent] = []
        self._seq = 0
        self._fail_copy = 0
        self._fail_delete = 0
        self._custom_metadata_bytes = 0
        self._events_file: io.BufferedWriter | None = None
        self._owns_root = False

    @classmethod
    def config_is_sensitive(cls, key: str) -> bool:
        """A local directory holds no credentials: every setting may be described."""
        return False

    @classmethod
    def default_config(cls, log_dirs: Sequence[Path]) -> Mapping[str, str]:
        """The root next to the first log dir (``embedded_root``)."""
        return {"dir": str(embedded_root(log_dirs))}

    @classmethod
    def instances(cls) -> list[DirectoryRemoteStorageManager]:
        """Instances created in this process, so an in-process test can reach the broker's."""
        with cls._instances_lock:
            return list(cls._instances)

    def configure(self, props: Mapping[str, str]) -> None:
        if props.get("dir"):
            self.root = Path(props["dir"])
        else:
            self.root = Path(tempfile.mkdtemp(prefix="tierlog-directory-rsm-"))
            self._owns_root = True
        self.root.mkdir(parents=True, exist_ok=True)
        self.broker_id = int(props.get("broker.id", "0"))
        self._delete_enabled = props.get("delete.enable", "true").lower() != "false"
        self._fail_copy = int(props.get("fail.copy.count", "0"))
        self._fail_delete = int(props.get("fail.delete.count", "0"))
        self._custom_metadata_bytes = int(props.get("custom.metadata.bytes", "0"))
        self._events_file = open(self.root / f"events-{self.broker_id}.jsonl", "ab")  # noqa: SIM115
        with self._instances_lock:
            self._instances.append(self)

    # --- fault injection -------------------------------------------------------------

    def inject_faults(
        self,
        *,
        fail_copy: int | None = None,
        fail_delete: int | None = None,
        custom_metadata_bytes: int | None = None,
    ) -> None:
        with self._lock:
            if fail_copy is not None:
                self._fail_copy = fail_copy
            if fail_delete is not None:
                self._fail_delete = fail_delete
            if custom_metadata_bytes is not None:
                self._custom_metadata_bytes = custom_metadata_bytes

    def _take_fault(self, kind: str) -> bool | int:
        """Consume one armed fault of ``kind``; the control file wins over in-process state."""
        with self._lock:
            path = self.root / FAULTS_FILE
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                raw = b""
            if raw:
                faults = json.loads(raw)
                self._fail_copy = max(self._fail_copy, int(faults.get("fail_copy", 0)))
                self._fail_delete = max(self._fail_delete, int(faults.get("fail_delete", 0)))
                self._custom_metadata_bytes = int(faults.get("custom_metadata_bytes", 0))
                if faults.get("fail_copy") or faults.get("fail_delete"):
                    faults["fail_copy"] = 0
                    faults["fail_delete"] = 0
                    _atomic_write(path, json.dumps(faults).encode())
            if kind == "custom":
                return self._custom_metadata_bytes
            if kind == COPY and self._fail_copy > 0:
                self._fail_copy -= 1
                return True
            if kind == DELETE and self._fail_delete > 0:
                self._fail_delete -= 1
                return True
            return False

    # --- events ----------------------------------------------------------------------

    def _emit(
        self,
        kind: str,
        md: RemoteLogSegmentMetadata,
        *,
        index_type: IndexType | None = None,
        error: BaseException | None = None,
    ) -> None:
        tip = md.topic_id_partition
        with self._lock:
            self._seq += 1
            ev = StorageEvent(
                seq=self._seq,
                type=kind,
                broker_id=self.broker_id,
                topic=tip.topic,
                partition=tip.partition,
                topic_id=str(tip.topic_id),
                segment_id=str(md.remote_log_segment_id.id),
                start_offset=md.start_offset,
                end_offset=md.end_offset,
                index_type=index_type.name if index_type is not None else None,
                failed=error is not None,
                error=repr(error) if error is not None else None,
            )
            self._events.append(ev)
            if self._events_file is not None:
                self._events_file.write(json.dumps(asdict(ev)).encode() + b"\n")
                self._events_file.flush()
            self._lock.notify_all()

    def events(
        self,
        kind: str | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        include_failed: bool = True,
    ) -> list[StorageEvent]:
        with self._lock:
            return [
                e
                for e in self._events
                if (kind is None or e.type == kind)
                and (topic is None or e.topic == topic)
                and (partition is None or e.partition == partition)
                and (include_failed or not e.failed)
            ]

    def wait_for(
        self, predicate: Callable[[list[StorageEvent]], bool], timeout_s: float
    ) -> list[StorageEvent]:
        """Block until ``predicate(all events)`` holds; raise TimeoutError otherwise."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while not predicate(self._events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"storage events never matched; saw {self._events!r}")
                self._lock.wait(left)
            return list(self._events)

    # --- layout ----------------------------------------------------------------------

    def _path(self, md: RemoteLogSegmentMetadata, kind: str | IndexType) -> Path:
        d = self.root / partition_dir_name(md.topic_id_partition)
        return d / (fileset_prefix(md) + _SUFFIX[kind])

    def stored_filesets(self, tip: TopicIdPartition) -> list[str]:
        """Fileset prefixes physically present for the partition, sorted by start offset."""
        d = self.root / partition_dir_name(tip)
        if not d.is_dir():
            return []
        return sorted({p.name.split(".", 1)[0] for p in d.iterdir() if p.suffix == ".log"})

    # --- RemoteStorageManager --------------------------------------------------------

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> CustomMetadata | None:
        sources: list[tuple[str | IndexType, Path | bytes]] = [
            ("log", data.log_segment),
            (IndexType.OFFSET, data.offset_index),
            (IndexType.TIMESTAMP, data.time_index),
            (IndexType.PRODUCER_SNAPSHOT, data.producer_snapshot_index),
            (IndexType.LEADER_EPOCH, data.leader_epoch_index),
        ]
        if data.transaction_index is not None and data.transaction_index.exists():
            sources.append((IndexType.TRANSACTION, data.transaction_index))
        try:
            if self._take_fault(COPY):
                raise RemoteStorageException("injected copy failure")
            self._path(metadata, "log").parent.mkdir(parents=True, exist_ok=True)
            for kind, src in sources:
                dst = self._path(metadata, kind)
                tmp = dst.with_name(dst.name + ".tmp")
                if isinstance(src, bytes):
                    tmp.write_bytes(src)
                elif src.exists():
                    shutil.copyfile(src, tmp)
                else:
                    tmp.write_bytes(b"")
                os.replace(tmp, dst)
        except Exception as e:
            self._remove_fileset(metadata)
            self._emit(COPY, metadata, error=e)
            if isinstance(e, RemoteStorageException):
                raise
            raise RemoteStorageException(f"copy of {metadata.remote_log_segment_id} failed") from e
        self._emit(COPY, metadata)
        size = self._take_fault("custom")
        return CustomMetadata(b"x" * int(size)) if size else None

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        path = self._path(metadata, "log")
        try:
            f = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError as e:
            self._emit(FETCH, metadata, error=e)
            raise RemoteResourceNotFoundException(f"no segment {path.name}") from e
        size = os.fstat(f.fileno()).st_size
        if (
            start_position < 0
            or start_position > size
            or (end_position is not None and not start_position <= end_position)
        ):
            f.close()
            err = RemoteStorageException(
                f"invalid range [{start_position}, {end_position}] for {size} bytes"
            )
            self._emit(FETCH, metadata, error=err)
            raise err
        f.seek(start_position)
        self._emit(FETCH, metadata)
        if end_position is None:
            return f
        with f:
            return io.BytesIO(f.read(end_position - start_position + 1))

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        path = self._path(metadata, index_type)
        try:
            f = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError as e:
            self._emit(FETCH_INDEX, metadata, index_type=index_type, error=e)
            raise RemoteResourceNotFoundException(f"no {index_type.name} index {path.name}") from e
        self._emit(FETCH_INDEX, metadata, index_type=index_type)
        return f

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        if not self._delete_enabled:
            return
        if self._take_fault(DELETE):
            err = RemoteStorageException("injected delete failure")
            self._emit(DELETE, metadata, error=err)
            raise err
        self._remove_fileset(metadata)
        self._emit(DELETE, metadata)

    def _remove_fileset(self, metadata: RemoteLogSegmentMetadata) -> None:
        for kind in _SUFFIX:
            p = self._path(metadata, kind)
            for q in (p, p.with_name(p.name + ".tmp")):
                with contextlib.suppress(FileNotFoundError):
                    q.unlink()

    def close(self) -> None:
        with self._lock:
            if self._events_file is not None:
                self._events_file.close()
                self._events_file = None
        with self._instances_lock:
            if self in self._instances:
                self._instances.remove(self)
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    # --- inventory -------------------------------------------------------------------

    def location(self) -> str:
        """The root; refused when it is this instance's private temporary directory."""
        if self._owns_root:
            raise RemoteStorageException(
                "the directory plugin has no dir (rsm.config.dir): its objects are in a "
                "private temporary directory"
            )
        return str(self.root)

    def list_objects(self, page_size: int = 1000) -> Iterator[list[StoredObject]]:
        """The files of every partition directory (the root's own files are bookkeeping:
        events and faults), without files still being written."""
        self.location()
        page: list[StoredObject] = []
        if not self.root.is_dir():
            return
        for d in sorted(os.scandir(self.root), key=lambda e: e.name):
            if not d.is_dir():
                continue
            for f in sorted(os.scandir(d.path), key=lambda e: e.name):
                if f.is_file() and not f.name.endswith(".tmp"):
                    page.append(StoredObject(f"{d.name}/{f.name}", f.stat().st_size))
                    if len(page) == page_size:
                        yield page
                        page = []
        if page:
            yield page

    def identify(self, key: str) -> SegmentObject | None:
        match = _SEGMENT_KEY.match(key)
        if match is None or match.group("suffix") not in _KIND_OF_SUFFIX:
            return None
        suffix = match.group("suffix")
        return SegmentObject(
            topic_id=_uuid(match.group("tid")),
            partition=int(match.group("partition")),
            segment_id=_uuid(match.group("sid")),
            kind=_KIND_OF_SUFFIX[suffix],
            segment_key=key[: -len(suffix)],
            topic=match.group("topic"),
        )

    def segment_key(self, metadata: RemoteLogSegmentMetadata) -> str:
        return f"{partition_dir_name(metadata.topic_id_partition)}/{fileset_prefix(metadata)}"

    def required_keys(self, metadata: RemoteLogSegmentMetadata) -> list[str]:
        base = self.segment_key(metadata)
        return [base + _SUFFIX[kind] for kind in _REQUIRED]

    def metadata_sizes(self, metadata: RemoteLogSegmentMetadata) -> Mapping[ObjectKind, int]:
        """The ``.log`` file is the segment, byte for byte."""
        return {ObjectKind.LOG: metadata.segment_size_in_bytes}

    def recorded_size(self, metadata: RemoteLogSegmentMetadata) -> int | None:
        return None

    def has_object(self, key: str) -> bool:
        return (self.root / key).is_file()

    def delete_objects(self, keys: Sequence[str]) -> None:
        root = self.root.resolve()
        paths = [self.root / key for key in keys]
        for key, path in zip(keys, paths, strict=True):
            if root not in path.resolve().parents:
                raise RemoteStorageException(f"refusing to delete {key!r}: outside {self.root}")
        for path in paths:
            path.unlink(missing_ok=True)
