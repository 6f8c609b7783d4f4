"""ApiVersions: the ranges in ``tierlog.protocol.versions``, in the client's version."""

from __future__ import annotations

from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.versions import advertised_entries
from tierlog.server.state import BrokerState


async def handle_api_versions(state: BrokerState, req: Request) -> Any:
    cls = response_schema(ApiKey.API_VERSIONS, req.header.api_version)
    entries = advertised_entries(cluster=state.replication is not None)
    return mk(cls, error_code=0, api_keys=entries, throttle_time=0)
