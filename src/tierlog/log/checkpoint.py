"""Small text files the log keeps beside its segments, written crash-safely.

Every file goes temp -> fsync -> rename -> fsync(dir), so a crash leaves either the old or the
new content, never a torn mix. Readers treat a malformed file like a missing one and log a
warning: a checkpoint only saves recovery work, so losing it must never stop the broker.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from tierlog.fsutil import atomic_write
from tierlog.log.names import TopicPartition

log = logging.getLogger(__name__)

_VERSION = 0
_T = TypeVar("_T")


def _write_checkpoint(path: Path, entries: list[str], *, durable: bool = True) -> None:
    """Kafka's ``CheckpointFile`` layout: the version, the entry count, one entry a line."""
    lines = [str(_VERSION), str(len(entries)), *entries]
    atomic_write(path, ("\n".join(lines) + "\n").encode(), durable=durable)


def _read_checkpoint(path: Path, what: str, parse: Callable[[str], _T]) -> list[_T]:
    """The entries of a ``CheckpointFile``, each read with ``parse``; none when the file is
    missing or malformed (``parse`` raising ``ValueError`` or ``IndexError`` included)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    try:
        # decoded inside the try: a torn or overwritten file may not even be UTF-8
        lines = raw.decode().splitlines()
        if int(lines[0]) != _VERSION:
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        body = lines[2 : 2 + count]
        if len(body) != count:
            raise ValueError(f"expected {count} entries, found {len(body)}")
        return [parse(line) for line in body]
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed %s %s: %s", what, path, exc)
        return []


def write_offsets_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Kafka's ``OffsetCheckpointFile``: "0\\n<n>\\n<topic> <partition> <offset>\\n"..."""
    _write_checkpoint(
        path, [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items())]
    )


def _offset_entry(line: str) -> tuple[TopicPartition, int]:
    topic, part, off = line.split(" ")
    return TopicPartition(topic, int(part)), int(off)


def read_offsets_checkpoint(path: Path) -> dict[TopicPartition, int]:
    return dict(_read_checkpoint(path, "checkpoint", _offset_entry))


def write_epoch_checkpoint(
    path: Path, entries: list[tuple[int, int]], *, durable: bool = True
) -> None:
    """``leader-epoch-checkpoint``: "0\\n<n>\\n<epoch> <start offset>\\n"..."""
    _write_checkpoint(path, [f"{e} {o}" for e, o in entries], durable=durable)


def _epoch_entry(line: str) -> tuple[int, int]:
    epoch, off = line.split(" ")
    return int(epoch), int(off)


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    return _read_checkpoint(path, "leader-epoch checkpoint", _epoch_entry)


def topic_id_to_base64(topic_id: uuid.UUID) -> str:
    """Kafka prints topic ids as URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_base64(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    atomic_write(path, f"version: 0\ntopic_id: {topic_id_to_base64(topic_id)}".encode())


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        if fields.get("version") != "0":
            raise ValueError(f"unknown version {fields.get('version')!r}")
        return topic_id_from_base64(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        log.warning("ignoring malformed %s: %s", path, exc)
        return None
