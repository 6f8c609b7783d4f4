"""Decompression of a v2 record batch's records section, for the five Kafka codecs.

Kept apart from the decoder so the decoder can be benchmarked and tested without caring
which library inflates the bytes. Snappy needs care: the Java client writes xerial
framing, librdkafka writes a raw block, and Kafka's reader accepts both, so we do too.
"""

from __future__ import annotations

import struct

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_LEN = 16
_BLOCK_LEN = struct.Struct(">i")


class UnsupportedCodec(ValueError):
    """The batch names a codec id outside Kafka's 0..4."""


def _snappy(payload: memoryview) -> memoryview:
    if bytes(payload[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return memoryview(cramjam.snappy.decompress_raw(payload))
    parts: list[memoryview] = []
    pos = _XERIAL_HEADER_LEN
    end = len(payload)
    while pos < end:
        (block_len,) = _BLOCK_LEN.unpack_from(payload, pos)
        pos += 4
        parts.append(memoryview(cramjam.snappy.decompress_raw(payload[pos : pos + block_len])))
        pos += block_len
    return memoryview(b"".join(parts))


def decompress(codec: int, payload: memoryview) -> memoryview:
    """Inflate a records section; `payload` is everything after the 61-byte batch header.

    Returns a view over the library's own buffer so the caller copies the bytes only once,
    when it joins sections into one contiguous decode buffer.
    """
    if codec == GZIP:
        return memoryview(cramjam.gzip.decompress(payload))
    if codec == SNAPPY:
        return _snappy(payload)
    if codec == LZ4:
        return memoryview(cramjam.lz4.decompress(payload))
    if codec == ZSTD:
        return memoryview(cramjam.zstd.decompress(payload))
    raise UnsupportedCodec(f"unknown compression codec id {codec}")
