"""Request decoding and response encoding on top of kio (sans-IO).

kio resolves schema classes by dynamic import on every call and builds readers lazily, so
the first request of each kind would cost milliseconds. Everything here is cached and
``preload`` warms the caches for the versions we advertise before the server accepts
connections.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.framing import size_prefix
from tierlog.protocol.guard import FrameBoundsError, check_request_frame

_HEAD = struct.Struct(">hhi")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: Any


class MalformedRequest(Exception):
    """The frame does not parse; the connection must be closed."""


class UnknownRequestSchema(Exception):
    """kio has no schema for this API key / version, so no response can be encoded for it.

    ``correlation_id`` is known because the first eight bytes of every request header have
    the same layout; ApiVersions uses it for the KIP-511 fallback.
    """

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"no schema for api_key={api_key} version={api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


def kio_version_range(api_key: int) -> tuple[int, int] | None:
    """The versions kio can (de)serialise for ``api_key``, or None if it knows no such API."""
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = schema_name_map[name]
    return min(versions), max(versions)


@cache
def request_schema(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, version)
    except Exception:
        return None


@cache
def response_schema(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(cls: type[Any]) -> Any:
    r = _READERS.get(cls)
    if r is None:
        r = _READERS[cls] = entity_reader(cls)
    return r


def _writer(cls: type[Any]) -> Any:
    w = _WRITERS.get(cls)
    if w is None:
        w = _WRITERS[cls] = entity_writer(cls)
    return w


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without decoding anything else."""
    if len(frame) < _HEAD.size:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    key, version, corr = _HEAD.unpack_from(frame, 0)
    return int(key), int(version), int(corr)


def decode_request(frame: bytes) -> Request:
    """Decode one frame (size prefix already removed) into header and kio body."""
    api_key, version, corr = peek_header(frame)
    cls = request_schema(api_key, version)
    if cls is None:
        raise UnknownRequestSchema(api_key, version, corr)
    try:
        check_request_frame(cls, frame)
    except FrameBoundsError as e:
        raise MalformedRequest(f"api_key={api_key} v{version}: {e}") from None
    try:
        hdr, n = _reader(cls.__header_schema__)(frame, 0)
        body, m = _reader(cls)(frame, n)
    except Exception as e:
        raise MalformedRequest(f"api_key={api_key} v{version}: {e!r}") from e
    if n + m > len(frame):
        raise MalformedRequest(f"api_key={api_key} v{version}: body overruns the frame")
    # Trailing bytes are ignored, as Kafka does: librdkafka 2.16 sends three extra bytes
    # after a null-topics Metadata v12 body.
    return Request(RequestHeader(api_key, version, corr, hdr.client_id), body)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """Header + body, size-prefixed, ready for the transport."""
    cls = type(body)
    hdr_cls = cls.__header_schema__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    _writer(hdr_cls)(buf, hdr_cls(correlation_id=correlation_id))
    _writer(cls)(buf, body)
    out = buf.getbuffer()
    out[:4] = size_prefix(len(out) - 4)
    del out
    return buf.getvalue()


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """Client side: header + body, size-prefixed (used by the CLI and tests)."""
    cls = type(body)
    hdr_cls = cls.__header_schema__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    hdr = hdr_cls(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    _writer(hdr_cls)(buf, hdr)
    _writer(cls)(buf, body)
    out = buf.getbuffer()
    out[:4] = size_prefix(len(out) - 4)
    del out
    return buf.getvalue()


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """Client side: (correlation_id, body) of one response frame."""
    cls = response_schema(api_key, version)
    hdr, n = _reader(cls.__header_schema__)(frame, 0)
    body, _ = _reader(cls)(frame, n)
    return int(hdr.correlation_id), body


def preload_steps(ranges: Mapping[ApiKey, tuple[int, int]]) -> Iterator[None]:
    """Warm one (api, version) per step, newest versions first (what clients pick).

    A server interleaves the steps with serving, so startup does not wait ~1 s for every
    schema while the first request of each kind still rarely pays the import cost.
    """
    for api_key, (lo, hi) in ranges.items():
        for v in range(hi, lo - 1, -1):
            req = request_schema(api_key, v)
            if req is not None:
                _reader(req.__header_schema__)
                _reader(req)
                resp = response_schema(api_key, v)
                _writer(resp.__header_schema__)
                _writer(resp)
            yield


def preload(ranges: Mapping[ApiKey, tuple[int, int]]) -> None:
    """Import every schema and build every reader/writer we may need, ahead of traffic."""
    for _ in preload_steps(ranges):
        pass
