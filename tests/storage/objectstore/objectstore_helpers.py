"""Builders shared by the object-store plugin tests: segment files and metadata, and a base
for backends that observe or hold the plugin's object-store requests."""

from __future__ import annotations

import os
import random
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.helpers import poll
from tierlog.storage.objectstore import ObjectStoreRemoteStorageManager
from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.tiered.api import (
    CustomMetadata,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

KiB = 1024
MiB = 1024 * KiB


class SameStoreBackend(ObjectBackend):
    """A second ``ObjectBackend`` over the store and settings of a plugin's own: a test
    subclass overrides a request method to observe or hold it (calling ``super()`` to issue
    it), and installs the instance as the plugin's ``backend``."""

    def __init__(self, inner: ObjectBackend) -> None:
        super().__init__(
            inner.store,
            inner.scheme,
            part_size=inner.part_size,
            max_concurrency=inner.max_concurrency,
        )


def record_batch(base_offset: int, payload: bytes, *, codec: int = 0) -> bytes:
    """A v2 record-batch header (61 bytes) + payload; enough for header scans and for
    byte-exact round trips (the CRC is not checked by the storage layer)."""
    length = 49 + len(payload)  # bytes after the length field
    header = struct.pack(
        ">qiibIhiqqqhii",
        base_offset,
        length,
        0,  # partition leader epoch
        2,  # magic
        0,  # crc (unchecked here)
        codec & 0x07,  # attributes
        0,  # last offset delta
        0,
        0,  # first / max timestamp
        -1,  # producer id
        -1,  # producer epoch
        -1,  # base sequence
        1,  # record count
    )
    assert len(header) == 61
    return header + payload


def build_segment(
    path: Path, size: int, *, compressible: bool = True, codec: int = 0, seed: int = 1
) -> bytes:
    """Writes a log of record batches of about ``size`` bytes and returns its bytes."""
    rng = random.Random(seed)
    out = bytearray()
    offset = 0
    while len(out) < size:
        n = rng.randint(200, 20_000)
        if compressible:
            words = [b"alpha", b"beta", b"gamma", b"delta", b"kafka", b"tier"]
            payload = b" ".join(rng.choice(words) for _ in range(n // 5))[:n]
        else:
            payload = rng.randbytes(n)
        out += record_batch(offset, payload, codec=codec)
        offset += 1
    data = bytes(out[:size]) if len(out) > size else bytes(out)
    path.write_bytes(data)
    return data


def segment_data(
    directory: Path,
    log_bytes: int,
    *,
    txn: bool = True,
    compressible: bool = True,
    codec: int = 0,
    seed: int = 1,
) -> tuple[LogSegmentData, bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "00000000000000000000.log"
    data = build_segment(log, log_bytes, compressible=compressible, codec=codec, seed=seed)
    (directory / "00000000000000000000.index").write_bytes(os.urandom(4096))
    (directory / "00000000000000000000.timeindex").write_bytes(os.urandom(6000))
    (directory / "00000000000000000001.snapshot").write_bytes(os.urandom(300))
    txn_path = directory / "00000000000000000000.txnindex"
    if txn:
        txn_path.write_bytes(os.urandom(340))
    lsd = LogSegmentData(
        log_segment=log,
        offset_index=directory / "00000000000000000000.index",
        time_index=directory / "00000000000000000000.timeindex",
        transaction_index=txn_path if txn else None,
        producer_snapshot_index=directory / "00000000000000000001.snapshot",
        leader_epoch_index=b"0\n2\n0 0\n3 17\n",
    )
    return lsd, data


def segment_metadata(
    size: int,
    *,
    topic: str = "orders",
    partition: int = 0,
    start_offset: int = 0,
    tip: TopicIdPartition | None = None,
) -> RemoteLogSegmentMetadata:
    tip = tip or TopicIdPartition(uuid.uuid4(), topic, partition)
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
        start_offset=start_offset,
        end_offset=start_offset + 99,
        max_timestamp_ms=1_700_000_000_000,
        broker_id=1,
        event_timestamp_ms=1_700_000_000_500,
        segment_size_in_bytes=size,
        custom_metadata=None,
        state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
        segment_leader_epochs={0: start_offset, 3: start_offset + 17},
    )


def finished(
    md: RemoteLogSegmentMetadata, custom: CustomMetadata | None
) -> RemoteLogSegmentMetadata:
    """The metadata as the broker stores it after COPY_SEGMENT_FINISHED."""
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=md.remote_log_segment_id,
        start_offset=md.start_offset,
        end_offset=md.end_offset,
        max_timestamp_ms=md.max_timestamp_ms,
        broker_id=md.broker_id,
        event_timestamp_ms=md.event_timestamp_ms,
        segment_size_in_bytes=md.segment_size_in_bytes,
        custom_metadata=custom,
        state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        segment_leader_epochs=md.segment_leader_epochs,
    )


def poll_until(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll ``predicate`` until true or the deadline passes (then fail)."""
    poll.wait_until(predicate, timeout_s=timeout, interval_s=0.002, what=what)


def make_rsm(props: dict[str, str]) -> ObjectStoreRemoteStorageManager:
    rsm = ObjectStoreRemoteStorageManager()
    rsm.configure(props)
    return rsm


def encryption_props(keys: dict[str, tuple[Path, Path]], active: str) -> dict[str, str]:
    props = {
        "encryption.enabled": "true",
        "encryption.key.pair.id": active,
        "encryption.key.pairs": ",".join(keys),
    }
    for kid, (public, private) in keys.items():
        props[f"encryption.key.pairs.{kid}.public.key.file"] = str(public)
        props[f"encryption.key.pairs.{kid}.private.key.file"] = str(private)
    return props


class ManualClock:
    """A clock only the test moves (``now``): timeouts are the test's decision, not how long
    a loaded machine takes between two lines."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
