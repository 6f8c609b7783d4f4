"""Spark's requests to the broker: Metadata, ListOffsets, Fetch and DescribeConfigs.

They run over ``tierlog.client.WireConnection``, the one blocking wire client, which hands
out raw record batches (fed to the same vectorised decoder the cold path uses, control
batches included so offset bounds stay exact), something librdkafka-based consumers never
do. What is Spark's own here is the routing: partitions go to their leader from Metadata,
one connection per node; this is a single-node broker today but the client does not assume
it. API keys and error codes are ``tierlog.protocol``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tierlog.client import WireConnection, parse_bootstrap
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType

TP = tuple[str, int]
FETCH_V, LIST_OFFSETS_V, METADATA_V, DESCRIBE_CONFIGS_V = 12, 9, 12, 4


class BrokerError(RuntimeError):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    internal: bool
    leaders: Mapping[int, int]  # partition -> leader node id


@dataclass(frozen=True)
class FetchedPartition:
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes
    aborted: tuple[tuple[int, int], ...] = ()
    """read_committed: (producer id, first offset) of the aborted transactions the records
    overlap."""


class BrokerClient:
    """Not thread-safe; one per task or per driver call."""

    def __init__(
        self, bootstrap: str, *, timeout_s: float = 30.0, client_id: str = "tierlog-spark"
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap)
        self._timeout_s = timeout_s
        self._client_id = client_id
        self._nodes: dict[int, tuple[str, int]] = {}
        self._conns: dict[int | None, WireConnection] = {}
        self._leaders: dict[TP, int] = {}

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _conn(self, node: int | None) -> WireConnection:
        conn = self._conns.get(node)
        if conn is None:
            if node is None or node not in self._nodes:
                errors = []
                for host, port in self._bootstrap:
                    try:
                        conn = WireConnection(
                            host, port, timeout_s=self._timeout_s, client_id=self._client_id
                        )
                        break
                    except OSError as exc:
                        errors.append(f"{host}:{port}: {exc}")
                else:
                    raise ConnectionError(f"no bootstrap server reachable ({'; '.join(errors)})")
            else:
                host, port = self._nodes[node]
                conn = WireConnection(
                    host, port, timeout_s=self._timeout_s, client_id=self._client_id
                )
            self._conns[node] = conn
        return conn

    def metadata(self, topics: Iterable[str] | None = None) -> dict[str, TopicInfo]:
        """All topics (None) or the named ones; unknown names are simply absent."""
        resp = self._conn(None).call(
            ApiKey.METADATA,
            METADATA_V,
            topics=None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            allow_auto_topic_creation=False,
        )
        self._nodes = {b.node_id: (b.host, b.port) for b in resp.brokers}
        out: dict[str, TopicInfo] = {}
        for t in resp.topics:
            if int(t.error_code) != 0:
                continue
            leaders = {p.partition_index: int(p.leader_id) for p in t.partitions}
            for p, leader in leaders.items():
                self._leaders[(t.name, p)] = leader
            out[t.name] = TopicInfo(t.name, str(t.topic_id), bool(t.is_internal), leaders)
        return out

    def _leader(self, tp: TP) -> int | None:
        if tp not in self._leaders:
            self.metadata([tp[0]])
        return self._leaders.get(tp)

    def list_offsets(
        self, queries: Mapping[TP, int], *, read_committed: bool = False
    ) -> dict[TP, tuple[int, int]]:
        """Timestamp (or -1 latest / -2 earliest) per partition -> (offset, timestamp).

        Offset -1 means no record at or after the timestamp. ``read_committed``: latest is
        the LSO, and no offset at or past it is found by timestamp.
        """
        by_leader: dict[int | None, dict[str, list[dict[str, int]]]] = {}
        for (topic, p), ts in queries.items():
            part = {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts}
            by_leader.setdefault(self._leader((topic, p)), {}).setdefault(topic, []).append(part)
        out: dict[TP, tuple[int, int]] = {}
        for leader, topics in by_leader.items():
            resp = self._conn(leader).call(
                ApiKey.LIST_OFFSETS,
                LIST_OFFSETS_V,
                replica_id=-1,
                isolation_level=int(read_committed),
                topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
            )
            for t in resp.topics:
                for p in t.partitions:
                    if int(p.error_code) != 0:
                        raise BrokerError(
                            f"ListOffsets {t.name}-{p.partition_index}: error {int(p.error_code)}",
                            int(p.error_code),
                        )
                    out[(t.name, p.partition_index)] = (int(p.offset), int(p.timestamp))
        return out

    def fetch(
        self,
        tp: TP,
        offset: int,
        *,
        max_bytes: int = 8 << 20,
        max_wait_ms: int = 0,
        read_committed: bool = False,
    ) -> FetchedPartition:
        """Raw batches from `offset` (sessionless), up to the LSO with ``read_committed``."""
        topic, p = tp
        part = {
            "partition": p,
            "current_leader_epoch": -1,
            "fetch_offset": offset,
            "last_fetched_epoch": -1,
            "log_start_offset": -1,
            "partition_max_bytes": max_bytes,
        }
        resp = self._conn(self._leader(tp)).call(
            ApiKey.FETCH,
            FETCH_V,
            replica_id=-1,
            max_wait=max_wait_ms,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=int(read_committed),
            session_id=0,
            session_epoch=-1,
            topics=[{"topic": topic, "partitions": [part]}],
            forgotten_topics_data=[],
            rack_id="",
        )
        if int(resp.error_code) != 0:
            raise BrokerError(f"Fetch: error {int(resp.error_code)}", int(resp.error_code))
        data = resp.responses[0].partitions[0]
        return FetchedPartition(
            int(data.error_code),
            int(data.high_watermark),
            int(data.log_start_offset),
            bytes(data.records or b""),
            tuple(
                (int(a.producer_id), int(a.first_offset)) for a in data.aborted_transactions or ()
            ),
        )

    def broker_configs(self) -> dict[str, str | None]:
        """Static configs of the broker we are connected to; sensitive values come back None."""
        if not self._nodes:
            self.metadata([])
        node = min(self._nodes) if self._nodes else 0
        resp = self._conn(None).call(
            ApiKey.DESCRIBE_CONFIGS,
            DESCRIBE_CONFIGS_V,
            resources=[
                {
                    "resource_type": ConfigResourceType.BROKER,
                    "resource_name": str(node),
                    "configuration_keys": None,
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        out: dict[str, str | None] = {}
        for result in resp.results:
            if int(result.error_code) != 0:
                raise BrokerError(
                    f"DescribeConfigs: {result.error_message}", int(result.error_code)
                )
            for c in result.configs:
                out[c.name] = None if c.is_sensitive else c.value
        return out
