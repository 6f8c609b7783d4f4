"""kio's private schema introspection: the one module that imports it.

kio generates one frozen dataclass per schema version and knows, for each field, whether it
holds a scalar, an entity or a tuple of either, whether it is nullable and which tag it has
if it is a tagged field. That knowledge lives in ``kio.serial._introspect``, a private
module with no compatibility promise. The response builder (``tierlog.protocol.builder``)
and the request frame guard (``tierlog.protocol.guard``) walk schemas with it, so it is
imported here and nowhere else.

``CHECKED_KIO_VERSION`` is the kio release whose private names and behaviour were checked
against this use; it is the version pyproject.toml pins. tests/protocol/test_kio_introspect.py
fails on any other installed kio, so an upgrade re-checks every entry point below.
"""

from __future__ import annotations

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

__all__ = [
    "CHECKED_KIO_VERSION",
    "EntityField",
    "EntityTupleField",
    "PrimitiveField",
    "PrimitiveTupleField",
    "classify_field",
    "get_field_tag",
    "is_optional",
]

CHECKED_KIO_VERSION = "0.6.5"
