"""Version-agnostic construction of kio response entities.

kio generates one frozen dataclass per API version, and the versions differ only by the
fields they add or drop. Handlers therefore describe a response once, with plain values, and
``mk`` fits it to whichever version the client asked for:

* keyword arguments naming a field that this version lacks are dropped, provided some
  other version of the schema has it; a name that no version has is a mistake (it would
  otherwise go out as the field's zero value) and raises ``UnknownFieldError``;
* fields this version requires but the handler did not give get Kafka's zero value
  (0, "", empty array, null for nullable fields, the nil UUID);
* nested entities may be given as dicts (or lists of dicts) and are built recursively with
  the nested class of the same version;
* error codes may be any ``int`` (our own ``ErrorCode`` included) and ``*_ms`` durations
  (kio's ``timedelta`` fields) may be given as integer milliseconds.
"""

from __future__ import annotations

import datetime
import importlib
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.index import schema_name_map

from tierlog.protocol.kio_introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

T = TypeVar("T")


class UnknownFieldError(TypeError):
    """``mk`` was given a field name that no version of the schema has."""

    def __init__(self, cls: type[Any], name: str) -> None:
        super().__init__(f"{cls.__module__}.{cls.__qualname__}: no version has a field {name!r}")
        self.cls = cls
        self.name = name


_Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def _to_error_code(value: Any) -> KioErrorCode:
    return value if isinstance(value, KioErrorCode) else KioErrorCode(int(value))


def _to_timedelta(value: Any) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=int(value))


def _entity_converter(entity_cls: type[Any]) -> _Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, Mapping):
            return mk(entity_cls, **value)
        return value

    return convert


def _tuple_of(inner: _Converter) -> _Converter:
    def convert(value: Any) -> Any:
        if value is None:
            return None
        return tuple(inner(v) for v in value)

    return convert


_ZERO_BY_KAFKA_TYPE: dict[str, object] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": b"",
    "uuid": uuid.UUID(int=0),
    "error_code": KioErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, tz=datetime.UTC),
}


class _Plan:
    __slots__ = ("_any_version", "cls", "converters", "zero_fill")

    def __init__(
        self,
        cls: type[Any],
        converters: dict[str, _Converter],
        zero_fill: dict[str, Callable[[], Any]],
    ) -> None:
        self.cls = cls
        self.converters = converters
        self.zero_fill = zero_fill
        self._any_version: frozenset[str] | None = None

    def in_any_version(self, name: str) -> bool:
        """Whether some version of this entity has ``name`` (looked up on the first miss)."""
        if self._any_version is None:
            self._any_version = _names_in_any_version(self.cls)
        return name in self._any_version


#: kio's module for one version of a schema: ``kio.schema.<schema>.v<version>.<kind>``.
_KIO_MODULE = re.compile(r"^kio\.schema\.(?P<schema>\w+)\.v\d+\.(?P<kind>\w+)$")


def _names_in_any_version(cls: type[Any]) -> frozenset[str]:
    """The field names of ``cls``'s entity across every version kio has of its schema.

    kio gives an entity the same class name in each version's module, so the other versions
    are found by putting each version of the schema (kio's index lists them) into the module
    path. A class outside that layout has only its own fields.
    """
    names = {f.name for f in fields(cls)}
    match = _KIO_MODULE.match(cls.__module__)
    if match is None:
        return frozenset(names)
    schema, kind = match["schema"], match["kind"]
    for version in schema_name_map.get(schema, {}):
        try:
            module = importlib.import_module(f"kio.schema.{schema}.v{version}.{kind}")
        except ImportError:
            continue
        other = vars(module).get(cls.__name__)
        if isinstance(other, type) and is_dataclass(other):
            names.update(f.name for f in fields(other))
    return frozenset(names)


_PLANS: dict[type[Any], _Plan] = {}


def _plan(cls: type[Any]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


def _make_plan(cls: type[Any]) -> _Plan:
    converters: dict[str, _Converter] = {}
    zero_fill: dict[str, Callable[[], Any]] = {}
    for f in fields(cls):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        conv: _Converter
        if isinstance(kind, EntityField):
            conv = _entity_converter(kind.type_)
        elif isinstance(kind, EntityTupleField):
            conv = _tuple_of(_entity_converter(kind.type_))
        elif isinstance(kind, PrimitiveTupleField):
            conv = _tuple_of(_scalar_converter(kafka_type))
        else:
            conv = _scalar_converter(kafka_type)
        converters[f.name] = conv
        if f.default is MISSING and f.default_factory is MISSING:
            zero_fill[f.name] = _zero_factory(f, kind, kafka_type)
    return _Plan(cls, converters, zero_fill)


def _scalar_converter(kafka_type: object) -> _Converter:
    if kafka_type == "error_code":
        return _to_error_code
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _to_timedelta
    return _identity


def _zero_factory(f: Any, kind: object, kafka_type: object) -> Callable[[], Any]:
    if isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
        return tuple
    if is_optional(f):
        return lambda: None
    if isinstance(kind, EntityField):
        entity_cls = kind.type_
        return lambda: mk(entity_cls)
    zero = _ZERO_BY_KAFKA_TYPE.get(str(kafka_type), 0)
    return lambda: zero


def mk(cls: type[T], **kw: Any) -> T:
    """Build ``cls`` from ``kw``, fitting the arguments to this schema version.

    Raises ``UnknownFieldError`` for a name that no version of the schema has.
    """
    plan = _plan(cls)
    converters = plan.converters
    args: dict[str, Any] = {}
    for name, value in kw.items():
        conv = converters.get(name)
        if conv is not None:
            args[name] = conv(value)
        elif not plan.in_any_version(name):
            raise UnknownFieldError(cls, name)
    for name, zero in plan.zero_fill.items():
        if name not in args:
            args[name] = zero()
    return cls(**args)


def has_field(cls: type[Any], name: str) -> bool:
    """Whether this schema version carries ``name`` (for behaviour that depends on it)."""
    return name in _plan(cls).converters
