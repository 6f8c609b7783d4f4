"""kio's private introspection, pinned: the installed kio is the release it was checked
against, and every entry point tierlog uses still answers as it did there."""

from __future__ import annotations

import tomllib
from dataclasses import Field, fields
from importlib.metadata import version
from pathlib import Path
from typing import Any

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import EpochEndOffset, PartitionData
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponsePartition

from tierlog.protocol.kio_introspect import (
    CHECKED_KIO_VERSION,
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _field(cls: type[Any], name: str) -> Field[Any]:
    return next(f for f in fields(cls) if f.name == name)


def test_installed_kio_is_the_checked_release() -> None:
    assert version("kio") == CHECKED_KIO_VERSION


def test_pyproject_pins_the_checked_release() -> None:
    deps = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    assert f"kio=={CHECKED_KIO_VERSION}" in deps


def test_classify_field_tells_the_four_kinds_apart() -> None:
    scalar = classify_field(_field(MetadataResponsePartition, "leader_id"))
    assert isinstance(scalar, PrimitiveField)
    scalars = classify_field(_field(MetadataResponsePartition, "replica_nodes"))
    assert isinstance(scalars, PrimitiveTupleField)
    entity = classify_field(_field(PartitionData, "diverging_epoch"))
    assert isinstance(entity, EntityField)
    assert entity.type_ is EpochEndOffset
    topics = classify_field(_field(MetadataRequest, "topics"))
    assert isinstance(topics, EntityTupleField)
    assert topics.type_ is MetadataRequestTopic


def test_is_optional_sees_nullable_fields_and_nullable_arrays() -> None:
    assert is_optional(_field(MetadataRequest, "topics"))
    assert is_optional(_field(PartitionData, "records"))
    assert not is_optional(_field(MetadataRequest, "allow_auto_topic_creation"))
    assert not is_optional(_field(MetadataResponsePartition, "replica_nodes"))


def test_get_field_tag_of_tagged_and_untagged_fields() -> None:
    assert get_field_tag(_field(FetchRequest, "cluster_id")) == 0
    assert get_field_tag(_field(PartitionData, "snapshot_id")) == 2
    assert get_field_tag(_field(FetchRequest, "replica_id")) is None
