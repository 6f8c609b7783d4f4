"""Per-chunk transforms: zstd compression, then AES-256-GCM encryption.

Each chunk is transformed on its own so any chunk can be fetched with one ranged GET and
decoded without its neighbours. An encrypted chunk is ``nonce(12) | ciphertext | tag(16)``.
The GCM associated data binds a chunk to its segment (per-segment random AAD), to its
position (chunk id) and to its compression flag, so chunks cannot be swapped, moved between
segments or have their flag flipped in the manifest without failing authentication.

Compression is decided per chunk: chunks mostly made of record batches that the producer
already compressed are stored raw (the batch-header scan is the heuristic), and any chunk
that zstd does not shrink is stored raw as well. The manifest records which chunks are
compressed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

import zstandard
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tierlog.storage.objectstore.errors import CorruptDataError

NONCE_SIZE = 12
TAG_SIZE = 16
ENCRYPTION_OVERHEAD = NONCE_SIZE + TAG_SIZE
_BLOCK = 16  # AES's block size in bytes
_CHUNK_AAD = struct.Struct(">IB")
#: A chunk is stored raw when zstd saves less than this fraction of it.
_MIN_SAVING = 0.03
#: ... or when at least this fraction of its bytes belong to already-compressed batches.
_COMPRESSED_BATCH_FRACTION = 0.5


@dataclass(frozen=True, slots=True)
class DataKey:
    """A segment's data-encryption key and associated data, both fresh random 256 bits."""

    key: bytes
    aad: bytes

    @classmethod
    def generate(cls) -> DataKey:
        return cls(AESGCM.generate_key(bit_length=256), os.urandom(32))

    def __repr__(self) -> str:
        return "DataKey(<redacted>)"


def chunk_aad(data_key: DataKey, chunk_id: int, compressed: bool) -> bytes:
    return data_key.aad + _CHUNK_AAD.pack(chunk_id, 1 if compressed else 0)


def blob_aad(data_key: DataKey, name: str) -> bytes:
    return data_key.aad + b"/" + name.encode()


def encrypt(data_key: DataKey, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE_SIZE)
    return nonce + AESGCM(data_key.key).encrypt(nonce, plaintext, aad)


def decrypt(data_key: DataKey, stored: bytes | memoryview, aad: bytes, what: str) -> bytes:
    if len(stored) < ENCRYPTION_OVERHEAD:
        raise CorruptDataError(f"{what}: {len(stored)} bytes is too short to be encrypted")
    try:
        return AESGCM(data_key.key).decrypt(stored[:NONCE_SIZE], stored[NONCE_SIZE:], aad)
    except InvalidTag:
        raise CorruptDataError(f"{what}: authentication failed (tampered or wrong key)") from None


class ChunkEncoder:
    """Turns original chunks into stored chunks for one segment upload."""

    def __init__(self, *, compress: bool, level: int, data_key: DataKey | None) -> None:
        self._compress = compress
        self._level = level
        self._data_key = data_key

    def encode(self, chunk_id: int, chunk: bytes, compressed_batch_fraction: float) -> EncodedChunk:
        payload = chunk
        compressed = False
        if self._compress and chunk and compressed_batch_fraction < _COMPRESSED_BATCH_FRACTION:
            candidate = zstandard.ZstdCompressor(
                level=self._level, write_content_size=True
            ).compress(chunk)
            if len(candidate) <= len(chunk) * (1 - _MIN_SAVING):
                payload, compressed = candidate, True
        if self._data_key is not None:
            payload = encrypt(
                self._data_key, payload, chunk_aad(self._data_key, chunk_id, compressed)
            )
        return EncodedChunk(payload, compressed)


@dataclass(frozen=True, slots=True)
class EncodedChunk:
    data: bytes
    compressed: bool


#: A buffer of at least the given size, to decode a chunk into, or None (then the decoder
#: allocates): the chunk buffer pool's ``lease``.
Lease = Callable[[int], memoryview | None]


class ChunkDecoder:
    """Turns stored chunks back into original chunks for one segment.

    With ``lease``, each step writes its output into a leased buffer (a slot of the chunk
    buffer pool, reused from chunk to chunk) instead of an allocation of its own: AES-GCM
    decrypts straight into one (``update_into``), zstd decompresses straight into one
    (``readinto``). A chunk decoded into a pool slot is written to the disk cache from
    that slot, without a copy into the cache's aligned buffer, and the memory that cold
    reads decode into is the pool's bounded, reused set of slots rather than one
    allocation of a chunk's size per chunk. Where no buffer is leased (the pool is empty,
    or there is none) the step allocates."""

    def __init__(self, data_key: DataKey | None, what: str, lease: Lease | None = None) -> None:
        self._data_key = data_key
        self._what = what
        self._lease = lease

    def decode(
        self, chunk_id: int, stored: bytes | memoryview, compressed: bool, original_size: int
    ) -> bytes | memoryview:
        """The original chunk; a plain stored chunk comes back as the same buffer (no copy)."""
        what = f"{self._what} chunk {chunk_id}"
        payload: bytes | memoryview = stored
        if self._data_key is not None:
            aad = chunk_aad(self._data_key, chunk_id, compressed)
            payload = self._decrypt(stored, aad, what)
        if compressed:
            payload = self._decompress(payload, original_size, what)
        if len(payload) != original_size:
            raise CorruptDataError(
                f"{what}: decoded to {len(payload)} bytes, manifest says {original_size}"
            )
        return payload

    def _decrypt(self, stored: bytes | memoryview, aad: bytes, what: str) -> bytes | memoryview:
        assert self._data_key is not None
        size = len(stored) - ENCRYPTION_OVERHEAD
        # ``update_into`` wants room for a block beyond the data
        out = None if self._lease is None or size < 0 else self._lease(size + _BLOCK - 1)
        if out is None:
            return decrypt(self._data_key, stored, aad, what)
        view = memoryview(stored)
        try:
            decryptor = Cipher(
                algorithms.AES(self._data_key.key),
                modes.GCM(view[:NONCE_SIZE], bytes(view[-TAG_SIZE:])),
            ).decryptor()
            decryptor.authenticate_additional_data(aad)
            n = decryptor.update_into(view[NONCE_SIZE:-TAG_SIZE], out)
            decryptor.finalize()  # the tag: nothing decrypted is used unless it holds
        except InvalidTag:
            out.release()
            raise CorruptDataError(
                f"{what}: authentication failed (tampered or wrong key)"
            ) from None
        return out[:n]

    def _decompress(
        self, payload: bytes | memoryview, original_size: int, what: str
    ) -> bytes | memoryview:
        out = None if self._lease is None else self._lease(original_size)
        try:
            if out is None:
                return zstandard.ZstdDecompressor().decompress(
                    payload, max_output_size=original_size
                )
            got = 0
            with zstandard.ZstdDecompressor().stream_reader(payload) as reader:
                while got < original_size:
                    n = reader.readinto(out[got:])
                    if not n:
                        break
                    got += n
                if got == original_size and reader.read(1):
                    got += 1  # more than the manifest says: reported below
        except zstandard.ZstdError as e:
            if out is not None:
                out.release()
            raise CorruptDataError(f"{what}: bad zstd frame: {e}") from None
        if got != original_size:
            out.release()
            decoded = f"more than {original_size}" if got > original_size else str(got)
            raise CorruptDataError(
                f"{what}: decoded to {decoded} bytes, manifest says {original_size}"
            )
        return out


class BatchCompressionScanner:
    """Walks Kafka record-batch headers chunk by chunk to measure, per chunk, how many bytes
    belong to batches the producer already compressed.

    Fed the chunks in order; ``peek(position, n)`` reads a header that straddles a chunk
    boundary from the file. An unparseable header stops the scan: the rest of the segment
    then counts as uncompressed (zstd's own size check still protects us).
    """

    def __init__(self, peek: Callable[[int, int], bytes]) -> None:
        self._peek = peek
        self._batch_end = 0
        self._batch_compressed = False
        self._broken = False

    def feed(self, start: int, data: bytes) -> float:
        end = start + len(data)
        if not data:
            return 0.0
        compressed = 0
        pos = start
        if self._batch_end > pos:
            step = min(self._batch_end, end) - pos
            compressed += step if self._batch_compressed else 0
            pos += step
        while pos < end and not self._broken:
            header = _header_at(data, pos - start, pos, self._peek)
            parsed = _parse_header(header)
            if parsed is None:
                self._broken = True
                break
            length, is_compressed = parsed
            self._batch_end = pos + length
            self._batch_compressed = is_compressed
            step = min(self._batch_end, end) - pos
            compressed += step if is_compressed else 0
            pos += step
        return compressed / len(data)


_HEADER_BYTES = 23


def _header_at(data: bytes, rel: int, absolute: int, peek: Callable[[int, int], bytes]) -> bytes:
    if rel + _HEADER_BYTES <= len(data):
        return data[rel : rel + _HEADER_BYTES]
    return peek(absolute, _HEADER_BYTES)


def _parse_header(header: bytes) -> tuple[int, bool] | None:
    """(entry length including the 12-byte prefix, compressed?) or None if invalid."""
    if len(header) < 18:
        return None
    (batch_length,) = struct.unpack_from(">i", header, 8)
    magic = header[16]
    if batch_length <= 0 or magic > 2:
        return None
    if magic == 2:
        if len(header) < _HEADER_BYTES:
            return None
        (attributes,) = struct.unpack_from(">h", header, 21)
    else:
        attributes = header[17]
    return 12 + batch_length, (attributes & 0x07) != 0
