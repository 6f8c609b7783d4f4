"""The JSON of each znode, in Kafka's formats (spec/kafka-replication.md §6.1).

Each record encodes to the bytes Kafka 3.x writes and decodes what Kafka 3.x writes, so a
zkCli.sh user sees familiar data. Decoding is strict about the fields a broker relies on
(a missing ``leader`` is an error, not a default) and tolerant of fields added by later
versions. Topic ids are kept in Kafka's text form (``Uuid.toString()``, 22-character URL-safe
base64), as the znode holds them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierlog.config import Endpoint
from tierlog.config.broker import parse_listener


class ZnodeFormatError(ValueError):
    """A znode's data is not in the expected format; the message names the znode kind."""


def _encode(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _decode(kind: str, data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZnodeFormatError(f"{kind}: not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ZnodeFormatError(f"{kind}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _field(kind: str, obj: Mapping[str, Any], name: str, type_: type) -> Any:
    value = obj.get(name)
    if not isinstance(value, type_) or (type_ is int and isinstance(value, bool)):
        raise ZnodeFormatError(f"{kind}: field {name!r} missing or not {type_.__name__}")
    return value


def _int_list(kind: str, value: Any, name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in value
    ):
        raise ZnodeFormatError(f"{kind}: {name} is not a list of broker ids")
    return tuple(value)


# ---- /brokers/ids/<id> -------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker (ephemeral znode, version 5). The broker epoch is the znode's czxid,
    not part of the data. tierlog listeners all speak PLAINTEXT, so every listener maps to
    that protocol in ``listener_security_protocol_map``."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0
    jmx_port: int = -1

    KIND = "broker registration"

    def encode(self) -> bytes:
        plaintext = next((e for e in self.endpoints if e.listener == "PLAINTEXT"), None)
        protocols = {e.listener: "PLAINTEXT" for e in self.endpoints}
        obj: dict[str, Any] = {
            "features": {},
            "listener_security_protocol_map": protocols,
            "endpoints": [str(e) for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "port": plaintext.port if plaintext else -1,
            "host": plaintext.host if plaintext else None,
            "version": 5,
            "timestamp": str(self.timestamp_ms),
        }
        if self.rack is not None:
            obj["rack"] = self.rack
        return _encode(obj)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        obj = _decode(cls.KIND, data)
        raw_endpoints = obj.get("endpoints")
        if not isinstance(raw_endpoints, list) or not all(
            isinstance(e, str) for e in raw_endpoints
        ):
            raise ZnodeFormatError(f"{cls.KIND}: endpoints is not a list of strings")
        try:
            endpoints = tuple(parse_listener("endpoints", e) for e in raw_endpoints)
        except ValueError as e:
            raise ZnodeFormatError(f"{cls.KIND}: {e}") from None
        rack = obj.get("rack")
        return cls(
            broker_id=broker_id,
            endpoints=endpoints,
            rack=rack if isinstance(rack, str) else None,
            timestamp_ms=int(obj.get("timestamp", 0)),
            jmx_port=int(obj.get("jmx_port", -1)),
        )


# ---- /controller and /controller_epoch ----------------------------------------------------


@dataclass(frozen=True)
class ControllerRegistration:
    """The elected controller (ephemeral znode, version 1)."""

    broker_id: int
    timestamp_ms: int = 0

    KIND = "controller"

    def encode(self) -> bytes:
        return _encode(
            {"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp_ms)}
        )

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        obj = _decode(cls.KIND, data)
        return cls(
            broker_id=_field(cls.KIND, obj, "brokerid", int),
            timestamp_ms=int(obj.get("timestamp", 0)),
        )


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (UnicodeDecodeError, ValueError):
        raise ZnodeFormatError(f"controller epoch: {data!r} is not a number") from None


# ---- /brokers/topics/<t> --------------------------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    """Replica assignment of a topic (version 3). The first replica of a partition is its
    preferred leader. ``adding``/``removing`` are non-empty only during a reassignment."""

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str | None = None
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    KIND = "topic assignment"

    def encode(self) -> bytes:
        def as_json(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items())}

        obj: dict[str, Any] = {
            "removing_replicas": as_json(self.removing),
            "partitions": as_json(self.partitions),
        }
        if self.topic_id is not None:
            obj["topic_id"] = self.topic_id
        obj["adding_replicas"] = as_json(self.adding)
        obj["version"] = 3
        return _encode(obj)

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        obj = _decode(cls.KIND, data)

        def as_map(name: str, required: bool) -> dict[int, tuple[int, ...]]:
            raw = obj.get(name)
            if raw is None and not required:
                return {}
            if not isinstance(raw, dict):
                raise ZnodeFormatError(f"{cls.KIND}: {name} is not an object")
            try:
                return {int(p): _int_list(cls.KIND, r, name) for p, r in raw.items()}
            except ValueError as e:
                raise ZnodeFormatError(f"{cls.KIND}: {name}: {e}") from None

        topic_id = obj.get("topic_id")
        return cls(
            partitions=as_map("partitions", True),
            topic_id=topic_id if isinstance(topic_id, str) else None,
            adding=as_map("adding_replicas", False),
            removing=as_map("removing_replicas", False),
        )


# ---- /brokers/topics/<t>/partitions/<p>/state ---------------------------------------------

NO_LEADER = -1
"""``leader`` of a partition without a live leader (offline)."""

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1


@dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of a partition (version 1). The znode's Stat.version is the partition
    epoch; it is not in the data. ``leader_recovery_state`` is written only when RECOVERING
    (after an unclean election, KIP-704)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED

    KIND = "partition state"

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": 1,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state == LEADER_RECOVERY_RECOVERING:
            obj["leader_recovery_state"] = LEADER_RECOVERY_RECOVERING
        return _encode(obj)

    @classmethod
    def decode(cls, data: bytes) -> PartitionState:
        obj = _decode(cls.KIND, data)
        recovery = obj.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)
        if recovery not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
            raise ZnodeFormatError(f"{cls.KIND}: unknown leader_recovery_state {recovery!r}")
        return cls(
            leader=_field(cls.KIND, obj, "leader", int),
            leader_epoch=_field(cls.KIND, obj, "leader_epoch", int),
            isr=_int_list(cls.KIND, obj.get("isr"), "isr"),
            controller_epoch=_field(cls.KIND, obj, "controller_epoch", int),
            leader_recovery_state=recovery,
        )


# ---- /config/topics/<t>, /config/brokers/<id | <default>> -----------------------------------


@dataclass(frozen=True)
class TopicConfigOverrides:
    """A topic's config overrides (version 1), as text values like ``server.properties``."""

    config: Mapping[str, str]

    KIND = "topic config"

    def encode(self) -> bytes:
        return _encode({"version": 1, "config": dict(sorted(self.config.items()))})

    @classmethod
    def decode(cls, data: bytes) -> TopicConfigOverrides:
        return cls(_config_map(cls.KIND, data))


@dataclass(frozen=True)
class BrokerConfigOverrides:
    """A broker's dynamic configs, or the cluster-wide defaults: the same JSON as a topic's."""

    config: Mapping[str, str]

    KIND = "broker config"

    def encode(self) -> bytes:
        return _encode({"version": 1, "config": dict(sorted(self.config.items()))})

    @classmethod
    def decode(cls, data: bytes) -> BrokerConfigOverrides:
        return cls(_config_map(cls.KIND, data))


def _config_map(kind: str, data: bytes) -> dict[str, str]:
    """The ``config`` object of a config znode (``version`` 1)."""
    obj = _decode(kind, data)
    config = obj.get("config", {})
    if not isinstance(config, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
        raise ZnodeFormatError(f"{kind}: config is not an object of strings")
    return dict(config)
