"""An asyncio Kafka connection for broker-to-broker requests (a follower's Fetch and
OffsetForLeaderEpoch to its leader), on the same sans-IO codec as the broker.

One request in flight at a time, as each fetcher sends one request and waits for it; the
owner (a ``ReplicaFetcher``) closes it on a leader change, an error or shutdown.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import decode_response, encode_request, request_schema

_SIZE = struct.Struct(">i")


class BrokerConnection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._corr = 0

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float) -> BrokerConnection:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        return cls(reader, writer, client_id)

    async def call(self, api_key: ApiKey, version: int, timeout_s: float, **fields: Any) -> Any:
        """Send one request built from ``fields`` and return the decoded response."""
        cls = request_schema(api_key, version)
        if cls is None:
            raise ValueError(f"no request schema for {api_key.kafka_name} v{version}")
        self._corr += 1
        corr = self._corr
        self._writer.write(
            encode_request(api_key, version, corr, self._client_id, mk(cls, **fields))
        )
        await self._writer.drain()

        async def receive() -> bytes:
            (size,) = _SIZE.unpack(await self._reader.readexactly(4))
            return await self._reader.readexactly(size)

        frame = await asyncio.wait_for(receive(), timeout_s)
        got, response = decode_response(api_key, version, frame)
        if got != corr:
            raise ConnectionError(f"correlation id {got}, expected {corr}")
        return response

    async def close(self) -> None:
        """Close without waiting long for the peer (a stuck peer must not hold shutdown)."""
        self._writer.close()
        try:
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        except (ConnectionError, OSError, TimeoutError):
            pass
