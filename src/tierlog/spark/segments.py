"""Segments an executor can read without the broker: local `.log` files and remote copies.

The driver ships a small picklable reference per segment inside each input partition; the
executor opens it here. Remote segments go through the configured RemoteStorageManager
itself (by default the object-store plugin), so chunk lookup, ranged GETs, decryption and
decompression are the storage plugin's own code, not a second implementation that could
drift from it. Plugin instances are cached per Python worker, which Spark reuses across
tasks, so clients and caches survive from one task to the next.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tierlog.log.index import OffsetPosition, readable_offset_entries
from tierlog.log.txn_index import AbortedTxn, aborted_txns_from_bytes
from tierlog.protocol.records import walk_headers
from tierlog.spark.planning import ColdSegment
from tierlog.tiered.api import (
    RSM_ALIASES,
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
    RemoteStorageManager,
    SupportsReadAhead,
    load_plugin,
)


@dataclass(frozen=True)
class FileSegmentRef:
    log_path: str
    base_offset: int


@dataclass(frozen=True)
class RsmSpec:
    """Which storage plugin to load on executors and its (prefix-stripped) properties."""

    class_name: str
    props: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, class_name: str, props: Mapping[str, str]) -> RsmSpec:
        return cls(class_name, tuple(sorted(props.items())))


@dataclass(frozen=True)
class RemoteSegmentRef:
    """A COPY_FINISHED segment. The metadata is carried as plain fields because the API
    value type holds a read-only mapping, which does not pickle."""

    rsm: RsmSpec
    fields: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, rsm: RsmSpec, metadata: RemoteLogSegmentMetadata) -> RemoteSegmentRef:
        values = {f.name: getattr(metadata, f.name) for f in dataclasses.fields(metadata)}
        values["segment_leader_epochs"] = dict(metadata.segment_leader_epochs)
        return cls(rsm, tuple(values.items()))

    def metadata(self) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(**dict(self.fields))


SegmentRef = FileSegmentRef | RemoteSegmentRef

_plugins: dict[RsmSpec, RemoteStorageManager] = {}
_plugins_lock = threading.Lock()


def storage_plugin(spec: RsmSpec) -> RemoteStorageManager:
    """One configured plugin per spec per process."""
    with _plugins_lock:
        rsm = _plugins.get(spec)
        if rsm is None:
            rsm = load_plugin(
                spec.class_name,
                RemoteStorageManager,  # type: ignore[type-abstract]
                RSM_ALIASES,
                dict(spec.props),
                "",
                config_key="tierlog.rsm.class",
            )
            _plugins[spec] = rsm
        return rsm


def _checked(ref: object) -> SegmentRef:
    if not isinstance(ref, FileSegmentRef | RemoteSegmentRef):
        raise TypeError(f"not a segment reference: {ref!r}")
    return ref


def open_log(ref: object, position: int, end_position: int = -1) -> BinaryIO:
    """A stream over the segment's `.log` bytes from `position` to `end_position`
    (inclusive; -1: the segment's end). A remote stream reads ahead no further than that."""
    ref = _checked(ref)
    if isinstance(ref, FileSegmentRef):
        f = open(ref.log_path, "rb")  # noqa: SIM115 - the caller closes the stream
        f.seek(position)
        return f
    end = None if end_position < 0 else end_position
    return storage_plugin(ref.rsm).fetch_log_segment(ref.metadata(), position, end)


def warm_segment(ref: object, position: int) -> None:
    """Let a plugin that can read ahead (``SupportsReadAhead``) load a remote segment's
    first chunks in the background; a no-op for files and other plugins."""
    ref = _checked(ref)
    if isinstance(ref, RemoteSegmentRef):
        rsm = storage_plugin(ref.rsm)
        if isinstance(rsm, SupportsReadAhead):
            rsm.warm(ref.metadata(), position)


def _as_pairs(entries: list[OffsetPosition]) -> list[tuple[int, int]]:
    return [(e.offset, e.position) for e in entries]


def aborted_txns(ref: object) -> list[AbortedTxn]:
    """The segment's transaction index (none if it has no file or object; a remote segment
    uploaded with an empty one is not asked for it)."""
    ref = _checked(ref)
    if isinstance(ref, FileSegmentRef):
        path = Path(ref.log_path).with_suffix(".txnindex")
        return aborted_txns_from_bytes(path.read_bytes(), path.name) if path.exists() else []
    metadata = ref.metadata()
    if metadata.txn_idx_empty:
        return []
    try:
        with storage_plugin(ref.rsm).fetch_index(metadata, IndexType.TRANSACTION) as f:
            return aborted_txns_from_bytes(f.read())
    except RemoteResourceNotFoundException:
        return []


def offset_index(ref: object, base_offset: int) -> list[tuple[int, int]]:
    ref = _checked(ref)
    if isinstance(ref, FileSegmentRef):
        path = Path(ref.log_path).with_suffix(".index")
        if not path.exists():
            return []
        return _as_pairs(readable_offset_entries(path.read_bytes(), base_offset))
    with storage_plugin(ref.rsm).fetch_index(ref.metadata(), IndexType.OFFSET) as stream:
        return _as_pairs(readable_offset_entries(stream.read(), base_offset))


def _last_offset(path: Path, index: list[tuple[int, int]]) -> tuple[int, int]:
    """(last offset, bytes of whole batches): walk batch headers from the last index entry."""
    size = path.stat().st_size
    pos = index[-1][1] if index else 0
    last = -1
    with open(path, "rb") as f:

        def read_at(position: int, n: int) -> bytes:
            f.seek(position)
            return f.read(n)

        for h in walk_headers(read_at, pos, size):
            last = h.last_offset
            pos = h.end
    return last, pos


def scan_log_dir(root: str) -> dict[tuple[str, int], list[ColdSegment]]:
    """Segments of every `<topic>-<partition>` directory under a Kafka log dir."""
    out: dict[tuple[str, int], list[ColdSegment]] = {}
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        topic, sep, part = entry.name.rpartition("-")
        if not entry.is_dir() or not sep or not part.isdigit():
            continue
        segs: list[ColdSegment] = []
        for log in sorted(Path(entry.path).glob("*.log")):
            if not log.stem.isdigit():
                continue
            base = int(log.stem)
            ref = FileSegmentRef(str(log), base)
            last, size = _last_offset(log, offset_index(ref, base))
            if last >= base:
                segs.append(ColdSegment(base, last, size, ref))
        out[(topic, int(part))] = segs
    return out


def read_all(stream: BinaryIO, size: int) -> bytes:
    """Read up to `size` bytes, looping over short reads of network-backed streams."""
    parts: list[bytes] = []
    want = size
    while want > 0:
        chunk = stream.read(want)
        if not chunk:
            break
        parts.append(chunk)
        want -= len(chunk)
    return b"".join(parts) if len(parts) != 1 else parts[0]


__all__ = [
    "FileSegmentRef",
    "RemoteSegmentRef",
    "RsmSpec",
    "SegmentRef",
    "offset_index",
    "open_log",
    "read_all",
    "scan_log_dir",
    "storage_plugin",
    "warm_segment",
]
