"""Bounds check of a request frame before kio's native reader sees it.

kio 0.6.5's Rust reader pre-allocates arrays from their declared element count. A 30-byte
frame declaring two billion elements makes it request ~40 GB, and the allocation failure
aborts the whole process. This module walks the frame along the same schema, without
building anything, and rejects any length or count that the remaining bytes cannot hold.
After it passes, every count kio sees is backed by real bytes, so its allocations are
bounded by the frame size (itself bounded by ``socket.request.max.bytes``).

The walk mirrors kio's layout rules: legacy vs compact (flexible) strings, bytes and arrays,
KIP-893 nullable structs, and tagged fields (known tags are checked inside their declared
size, unknown ones skipped). Fixed-size arrays are skipped arithmetically.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from tierlog.protocol.kio_introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
)


class FrameBoundsError(ValueError):
    pass


# A check takes (buffer, position, end) and returns the position after the value.
Check = Callable[[bytes, int, int], int]

_FIXED = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


def _need(pos: int, n: int, end: int) -> int:
    if n < 0 or pos + n > end:
        raise FrameBoundsError(f"{n} bytes at {pos} overrun the frame end {end}")
    return pos + n


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise FrameBoundsError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise FrameBoundsError("varint too long")


def _i16(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    _need(pos, 2, end)
    return int.from_bytes(buf[pos : pos + 2], "big", signed=True), pos + 2


def _i32(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    _need(pos, 4, end)
    return int.from_bytes(buf[pos : pos + 4], "big", signed=True), pos + 4


def _fixed(n: int) -> Check:
    def check(buf: bytes, pos: int, end: int) -> int:
        return _need(pos, n, end)

    return check


def _length_prefixed(flexible: bool, wide: bool, nullable: bool = True) -> Check:
    """Strings (int16 legacy length) and bytes/records (int32 legacy length).

    A null where the schema does not allow one is refused, as Kafka's generated readers do
    (kio would hand the handler a ``None`` it does not expect).
    """

    def check(buf: bytes, pos: int, end: int) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        elif wide:
            n, pos = _i32(buf, pos, end)
        else:
            n, pos = _i16(buf, pos, end)
        if n < 0:
            if not nullable:
                raise FrameBoundsError("null for a non-nullable string/bytes field")
            return pos
        return _need(pos, n, end)

    return check


def _array(flexible: bool, item: Check, item_size: int | None, nullable: bool) -> Check:
    def check(buf: bytes, pos: int, end: int) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        else:
            n, pos = _i32(buf, pos, end)
        if n < 0:
            if not nullable:
                raise FrameBoundsError("null for a non-nullable array")
            return pos
        if n > end - pos:  # every element takes at least one byte
            raise FrameBoundsError(f"array of {n} elements in {end - pos} bytes")
        if item_size is not None:
            return _need(pos, n * item_size, end)
        for _ in range(n):
            pos = item(buf, pos, end)
        return pos

    return check


def _nullable_struct(inner: Check) -> Check:
    def check(buf: bytes, pos: int, end: int) -> int:
        _need(pos, 1, end)
        marker = buf[pos]
        pos += 1
        if marker == 0xFF:  # -1: null
            return pos
        return inner(buf, pos, end)

    return check


_ENTITY_CHECKS: dict[type[Any], Check] = {}


def _scalar(kafka_type: str, flexible: bool, nullable: bool) -> tuple[Check, int | None]:
    size = _FIXED.get(kafka_type)
    if size is not None:
        return _fixed(size), size
    if kafka_type == "string":
        return _length_prefixed(flexible, wide=False, nullable=nullable), None
    if kafka_type in ("bytes", "records"):
        return _length_prefixed(flexible, wide=True, nullable=nullable), None
    raise TypeError(f"no bounds check for kafka type {kafka_type!r}")


def _union_with_none(t: Any) -> bool:
    return get_origin(t) in (UnionType, Union) and NoneType in get_args(t)


def _field_check(f: Any, flexible: bool, is_tag: bool, is_header: bool) -> Check:
    kind = classify_field(f)
    nullable = _union_with_none(f.type)
    if isinstance(kind, EntityTupleField):
        return _array(flexible, entity_check(kind.type_), None, nullable)
    if isinstance(kind, EntityField):
        inner = entity_check(kind.type_)
        return _nullable_struct(inner) if (nullable and not is_tag) else inner
    kafka_type = f.metadata["kafka_type"]
    if is_header and f.name == "client_id":  # always a legacy string, even in header v2
        return _length_prefixed(False, wide=False)
    if isinstance(kind, PrimitiveTupleField):
        tuple_type = (
            next(a for a in get_args(f.type) if get_origin(a) is tuple) if nullable else f.type
        )
        item, size = _scalar(kafka_type, flexible, _union_with_none(get_args(tuple_type)[0]))
        return _array(flexible, item, size, nullable)
    return _scalar(kafka_type, flexible, nullable)[0]


def entity_check(cls: type[Any]) -> Check:
    """The bounds check for one kio entity class (cached)."""
    cached = _ENTITY_CHECKS.get(cls)
    if cached is not None:
        return cached
    flexible = bool(cls.__flexible__)
    is_header = cls.__name__ == "RequestHeader"
    regular: list[Check] = []
    tagged: dict[int, Check] = {}

    def check(buf: bytes, pos: int, end: int) -> int:
        for c in regular:
            pos = c(buf, pos, end)
        if not flexible:
            return pos
        count, pos = _uvarint(buf, pos, end)
        if count > end - pos:
            raise FrameBoundsError(f"{count} tagged fields in {end - pos} bytes")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            value_end = _need(pos, size, end)
            inner = tagged.get(tag)
            if inner is not None:
                inner(buf, pos, value_end)
            pos = value_end
        return pos

    _ENTITY_CHECKS[cls] = check  # before recursing: schemas may nest the same class
    for f in fields(cls):
        tag = get_field_tag(f)
        c = _field_check(f, flexible, tag is not None, is_header)
        if tag is None:
            regular.append(c)
        else:
            tagged[int(tag)] = c
    return check


def check_request_frame(request_cls: type[Any], frame: bytes) -> None:
    """Raise ``FrameBoundsError`` unless every length in ``frame`` fits inside it."""
    end = len(frame)
    pos = entity_check(request_cls.__header_schema__)(frame, 0, end)
    entity_check(request_cls)(frame, pos, end)
