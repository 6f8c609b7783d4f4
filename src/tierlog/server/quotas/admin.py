"""DescribeClientQuotas and AlterClientQuotas decided as ZooKeeper-mode Kafka decides them
(``ZkAdminManager.describeClientQuotas`` / ``alterClientQuotas``), over entity settings.

Describe takes a filter of at most one component per entity type, each matching an exact
name, the default entity, or any specified name; an entity type the filter leaves out
matches anything unless the filter is strict, when the entity must not have it. ``ip``
components never mix with ``user``/``client-id`` ones. Only the quota keys of an entity are
described, and an entity without any is left out.

Alter applies each entry's operations (set or remove a key) to that entity's settings; each
entry succeeds or fails alone, and ``validate_only`` checks without writing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tierlog.server.quotas.entities import (
    CLIENT_ID,
    DEFAULT,
    IP,
    IP_KEYS,
    USER,
    USER_CLIENT_KEYS,
    InvalidQuotaRequest,
    QuotaEntity,
    UnsupportedQuotaRequest,
    checked_value,
    sanitize,
)

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True)
class _Want:
    """One component resolved: ``name`` is the sanitized name wanted (``DEFAULT`` for the
    default), or None for any specified name."""

    name: str | None


def _parse_filter(components: list[FilterComponent]) -> dict[str, _Want]:
    wants: dict[str, _Want] = {}
    for c in components:
        if c.entity_type == "":
            raise InvalidQuotaRequest("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise UnsupportedQuotaRequest(f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in wants:
            kind = "client" if c.entity_type == CLIENT_ID else c.entity_type
            raise InvalidQuotaRequest(f"Duplicate {kind} filter component entity type")
        if c.match_type == MATCH_EXACT:
            want = _Want(DEFAULT if c.match is None else sanitize(c.match))
        elif c.match_type == MATCH_DEFAULT:
            want = _Want(DEFAULT)
        elif c.match_type == MATCH_SPECIFIED:
            want = _Want(None)
        else:
            raise InvalidQuotaRequest(f"Unexpected match type: {c.match_type}")
        wants[c.entity_type] = want
    if IP in wants and (USER in wants or CLIENT_ID in wants):
        raise InvalidQuotaRequest(
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component."
        )
    return wants


def _matches(want: _Want | None, name: str | None, strict: bool) -> bool:
    if want is None:
        return name is None or not strict
    if name is None:
        return False
    return want.name is None or want.name == name


def describe(
    configs: Mapping[str, Mapping[str, str]], components: list[FilterComponent], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities the filter selects with their quota values; raises
    ``InvalidQuotaRequest`` / ``UnsupportedQuotaRequest`` for a filter Kafka refuses."""
    wants = _parse_filter(components)
    ip_only = IP in wants
    user_client_only = USER in wants or CLIENT_ID in wants
    out: list[tuple[QuotaEntity, dict[str, float]]] = []
    for path in sorted(configs):
        entity = QuotaEntity.from_path(path)
        if entity is None:
            continue
        if entity.ip is not None:
            if user_client_only or not _matches(wants.get(IP), entity.ip, strict):
                continue
            keys = IP_KEYS
        else:
            if ip_only:
                continue
            if not _matches(wants.get(USER), entity.user, strict):
                continue
            if not _matches(wants.get(CLIENT_ID), entity.client_id, strict):
                continue
            keys = USER_CLIENT_KEYS
        values: dict[str, float] = {}
        for key, text in configs[path].items():
            if key in keys:
                try:
                    values[key] = float(text)
                except ValueError:
                    continue
        if values:
            out.append((entity, values))
    return out


@dataclass(frozen=True, slots=True)
class Op:
    key: str
    value: float
    remove: bool


def altered(entity: QuotaEntity, current: Mapping[str, str], ops: list[Op]) -> dict[str, str]:
    """The entity's settings after ``ops``; raises ``InvalidQuotaRequest`` as Kafka does."""
    config = dict(current)
    keys = entity.keys
    for op in ops:
        if op.remove:
            config.pop(op.key, None)
        else:
            config[op.key] = checked_value(op.key, op.value, keys)
    return config
