"""``replica.socket.timeout.ms``: a follower whose leader accepts its connection and then
never answers drops that connection after the timeout (plus the fetch's wait) and connects
again, as Kafka's fetcher does when its request times out."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from tierlog.log import LogConfig, LogManager, TopicPartition
from tierlog.replication.fetcher import FetcherSettings, ReplicaFetcher


def test_a_silent_leader_is_dropped_after_the_socket_timeout(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], LogConfig())
    mgr.load()
    plog = mgr.create_log(TopicPartition("t", 0), uuid.UUID(int=1))

    async def run() -> int:
        accepted: list[asyncio.StreamWriter] = []
        third = asyncio.Event()

        async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)  # read nothing, answer nothing
            if len(accepted) >= 3:
                third.set()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = int(server.sockets[0].getsockname()[1])
        settings = FetcherSettings(
            broker_id=2,
            max_wait_ms=100,
            min_bytes=1,
            max_bytes=1 << 20,
            partition_max_bytes=1 << 20,
            backoff_ms=50,
            request_timeout_s=0.3,
        )
        fetcher = ReplicaFetcher(1, 0, settings, lambda: ("127.0.0.1", port), lambda _k: None)
        fetcher.add("t", 0, plog, 0)
        fetcher.start()
        try:
            try:
                await asyncio.wait_for(third.wait(), 20)
            except TimeoutError:
                pass
        finally:
            await fetcher.close()
            for w in accepted:
                w.close()
            server.close()
            await server.wait_closed()
        return len(accepted)

    try:
        assert asyncio.run(run()) >= 3, "the follower gave up on the silent leader and retried"
    finally:
        mgr.shutdown()
