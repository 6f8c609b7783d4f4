"""Decoding a frame, choosing the handler for its API, and encoding what it returns.

Handlers are registered per API key and receive the decoded kio request. They return one of:

* a kio response entity: encoded here for the request's version;
* ``RawReply``: already encoded buffers (the zero-copy Fetch path);
* ``NO_REPLY``: nothing is sent (Produce with acks=0).

Protocol failures are decided here, in one place: an unparsable frame closes the connection,
an unknown ApiVersions version gets the KIP-511 fallback, and any other API or version we do
not serve gets the request's own response type filled with UNSUPPORTED_VERSION (or, when kio
cannot even describe it, the connection is closed, which is what Kafka does too).
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import (
    MalformedRequest,
    Request,
    UnknownRequestSchema,
    decode_request,
    encode_response,
    response_schema,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.fetch_response import ResponsePart
from tierlog.protocol.versions import api_name, api_versions_fallback, is_supported
from tierlog.server.connection import ConnectionInfo, Reply
from tierlog.server.metrics import BrokerMetrics
from tierlog.server.quotas.entities import QuotaKind
from tierlog.server.quotas.loop_time import LoopTimer
from tierlog.server.quotas.manager import ClientQuotas

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RawReply:
    buffers: list[ResponsePart]
    size: int


class _NoReply:
    pass


NO_REPLY = _NoReply()


class _Close:
    pass


#: The handler wants the connection closed without a reply (Kafka does this when an acks=0
#: produce fails, so that the producer notices and refreshes its metadata).
CLOSE = _Close()

HandlerResult = Any  # kio response entity | RawReply | NO_REPLY | CLOSE
Handler = Callable[[Request, ConnectionInfo], Awaitable[HandlerResult]]


#: Requests no client quota applies to: brokers' own (Kafka exempts its cluster actions).
QUOTA_EXEMPT = frozenset({ApiKey.WRITE_TXN_MARKERS})


class Router:
    def __init__(self, metrics: BrokerMetrics, quotas: ClientQuotas | None = None) -> None:
        self._handlers: dict[int, Handler] = {}
        self._metrics = metrics
        self._quotas = quotas

    def register(self, api_key: ApiKey, handler: Handler) -> None:
        self._handlers[api_key] = handler

    async def handle(self, frame: bytes, conn: ConnectionInfo) -> Reply:
        started = time.perf_counter()
        self._metrics.bytes_in.inc(len(frame) + 4)
        try:
            request = decode_request(frame)
        except UnknownRequestSchema as e:
            if e.api_key == ApiKey.API_VERSIONS:
                return self._sent([api_versions_fallback(e.correlation_id)])
            log.warning("closing connection from %s: %s", conn.peer, e)
            return None
        except MalformedRequest as e:
            log.warning("closing connection from %s: malformed request: %s", conn.peer, e)
            return None
        hdr = request.header
        handler = self._handlers.get(hdr.api_key)
        name = api_name(hdr.api_key)
        if handler is None or not is_supported(hdr.api_key, hdr.api_version):
            if hdr.api_key == ApiKey.API_VERSIONS:
                return self._sent([api_versions_fallback(hdr.correlation_id)])
            log.info("unsupported api_key=%d v%d from %s", hdr.api_key, hdr.api_version, conn.peer)
            body = error_response(hdr.api_key, hdr.api_version, ErrorCode.UNSUPPORTED_VERSION)
            return self._sent(
                [encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, body)]
            )
        conn.begin_request(hdr.client_id or "", len(frame))
        quotas = self._quotas
        timed = (
            quotas is not None
            and quotas.enabled(QuotaKind.REQUEST)
            and hdr.api_key not in QUOTA_EXEMPT
        )
        result: HandlerResult
        try:
            if timed:
                conn.timer = LoopTimer()
                result = await conn.timer.run(handler(request, conn))
            else:
                result = await handler(request, conn)
        except Exception:
            # A bug in a handler must not take the connection down with it: answer like
            # Kafka does for an unexpected exception, and log it loudly.
            log.exception("%s v%d from %s failed", name, hdr.api_version, conn.peer)
            result = error_response(hdr.api_key, hdr.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            self._metrics.observe_request(name, time.perf_counter() - started)
        if timed:
            self._charge_request(conn)
        if conn.throttle_ms > 0:
            result = _with_throttle_time(result, conn.throttle_ms)
        if result is NO_REPLY:
            return []
        if result is CLOSE:
            return None
        if isinstance(result, RawReply):
            self._metrics.bytes_out.inc(result.size)
            return result.buffers
        return self._sent(
            [encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, result)]
        )

    def _charge_request(self, conn: ConnectionInfo) -> None:
        """Charge the request's loop time to the client's ``request_percentage`` (unless its
        handler did, or it is exempt)."""
        quotas, timer = self._quotas, conn.timer
        if quotas is None or timer is None:
            return
        if not conn.request_charged and not conn.quota_exempt:
            throttle = quotas.record(
                QuotaKind.REQUEST,
                conn.principal,
                conn.client_id,
                timer.elapsed() * 100,
                time.monotonic() * 1000,
            )
            if throttle > conn.throttle_ms:
                quotas.throttled(QuotaKind.REQUEST, throttle)
                conn.throttle(throttle)

    def _sent(self, buffers: Sequence[bytes]) -> Reply:
        self._metrics.bytes_out.inc(sum(len(b) for b in buffers))
        return buffers


def _with_throttle_time(result: HandlerResult, throttle_ms: int) -> HandlerResult:
    """The response with the connection's throttle time, when it has the field (Kafka's
    ``sendResponseMaybeThrottle``); the connection is muted for as long once it is sent."""
    if not is_dataclass(result) or isinstance(result, type):
        return result
    if not any(f.name == "throttle_time" for f in fields(result)):
        return result
    return replace(result, throttle_time=datetime.timedelta(milliseconds=throttle_ms))


def error_response(api_key: int, version: int, code: ErrorCode) -> Any:
    """The API's response with every field zeroed and each top-level error code set."""
    cls = response_schema(api_key, version)
    kw = {f.name: code for f in fields(cls) if f.metadata.get("kafka_type") == "error_code"}
    return mk(cls, **kw)
