"""DescribeClientQuotas (48) and AlterClientQuotas (49), answered as ZooKeeper-mode Kafka.

The decisions are ``server.quotas.admin``'s; this module reads and writes the settings
through the broker's ``QuotaStore`` (the state file, or ZooKeeper in cluster mode, from
any broker: Kafka's ZK-mode brokers write the znodes themselves) and maps refusals to
Kafka's error codes: INVALID_REQUEST for a bad filter, entity, key or value,
UNSUPPORTED_VERSION for a custom entity type in a filter. A ZooKeeper failure answers
UNKNOWN_SERVER_ERROR with its message, for that entry only.
"""

from __future__ import annotations

import logging
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.quotas.admin import FilterComponent, Op, altered, describe
from tierlog.server.quotas.entities import (
    InvalidQuotaRequest,
    QuotaEntity,
    UnsupportedQuotaRequest,
)
from tierlog.server.state import BrokerState

log = logging.getLogger(__name__)

NOT_LOADED = "client quotas are not loaded yet (the broker is joining the cluster)"


def _entity_data(entity: QuotaEntity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity.to_wire()]


async def handle_describe_client_quotas(state: BrokerState, req: Request) -> Any:
    schema = response_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, req.header.api_version)
    body = req.body
    components = [
        FilterComponent(c.entity_type, int(c.match_type), c.match) for c in body.components
    ]
    if state.quota_store is None:
        return mk(
            schema,
            throttle_time=0,
            error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
            error_message=NOT_LOADED,
            entries=None,
        )
    try:
        found = describe(await state.quota_store.read_all(), components, bool(body.strict))
    except (InvalidQuotaRequest, UnsupportedQuotaRequest) as e:
        code = (
            ErrorCode.INVALID_REQUEST
            if isinstance(e, InvalidQuotaRequest)
            else ErrorCode.UNSUPPORTED_VERSION
        )
        return mk(schema, throttle_time=0, error_code=code, error_message=str(e), entries=None)
    entries = [
        {
            "entity": _entity_data(entity),
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in found
    ]
    return mk(schema, throttle_time=0, error_code=0, error_message=None, entries=entries)


async def _alter_one(state: BrokerState, entry: Any, validate_only: bool) -> dict[str, Any]:
    components = [(e.entity_type, e.entity_name) for e in entry.entity]
    answer: dict[str, Any] = {
        "entity": [{"entity_type": t, "entity_name": n} for t, n in components],
        "error_code": 0,
        "error_message": None,
    }
    store = state.quota_store
    if store is None:
        answer["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
        answer["error_message"] = NOT_LOADED
        return answer
    try:
        entity = QuotaEntity.from_wire(components)
        ops = [Op(op.key, float(op.value), bool(op.remove)) for op in entry.ops]
        config = altered(entity, await store.read(entity.path), ops)
        if not validate_only:
            await store.write(entity.path, config)
            log.info("client quotas of %s are now %s", entity.path, config or "none")
    except InvalidQuotaRequest as e:
        answer["error_code"] = ErrorCode.INVALID_REQUEST
        answer["error_message"] = str(e)
    except Exception as e:
        log.exception("altering client quotas of %s failed", components)
        answer["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
        answer["error_message"] = str(e)
    return answer


async def handle_alter_client_quotas(state: BrokerState, req: Request) -> Any:
    body = req.body
    validate_only = bool(body.validate_only)
    entries = [await _alter_one(state, entry, validate_only) for entry in body.entries]
    return mk(
        response_schema(ApiKey.ALTER_CLIENT_QUOTAS, req.header.api_version),
        throttle_time=0,
        entries=entries,
    )
