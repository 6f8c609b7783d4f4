"""Topics: names, ids, partition counts and config overrides, persisted across restarts.

The set of topics lives in ``__tierlog_topics.json`` in the first log dir (rewritten
atomically on every change); partition data lives in the log engine, which also records the
topic id in each partition's ``partition.metadata``. This class is the only writer of both,
so a topic's definition and its logs change together.

In cluster mode (``zookeeper.connect`` set) a broker holds logs only for the partitions it
hosts a replica of, as Kafka's brokers do: topics are defined here for every topic of the
cluster (their ids and configs), while the replication layer, which alone knows the
assignment, opens a partition's log when this broker becomes one of its replicas
(``open_log``) and deletes it when it stops being one (``close_log``). A single broker hosts
every partition, so its logs are created with their topic.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierlog.config.broker import BrokerConfig
from tierlog.config.definitions import ConfigError
from tierlog.config.incremental import list_op
from tierlog.config.topic import (
    ConfigEntry,
    describe_topic_config,
    effective_topic_config,
    parse_topic_overrides,
    render_overrides,
    validate_topic_config,
)
from tierlog.log.config import LogConfig
from tierlog.log.names import TopicPartition
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.log_configs import log_config_for
from tierlog.server.state_files import read_json, write_json

log = logging.getLogger(__name__)

STATE_FILE = "__tierlog_topics.json"
MAX_NAME_LENGTH = 249
MAX_PARTITIONS = 10_000
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__remote_log_metadata", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``; also the guard against paths escaping the data dir."""
    if not name:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
        )
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'",
        )


def collision_key(name: str) -> str:
    """Kafka metric names replace '.' with '_', so such names would collide there."""
    return name.replace(".", "_")


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicManager:
    def __init__(self, broker: BrokerConfig, log_manager: Any, state_dir: Path) -> None:
        self._broker = broker
        self._logs = log_manager
        self._path = state_dir / STATE_FILE
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        #: Logs only for hosted replicas (cluster mode): see the module's docstring.
        self.hosted_logs_only = broker.get("zookeeper.connect") is not None

    # ---- persistence ------------------------------------------------------------------
    def load(self) -> dict[str, LogConfig]:
        """Read the stored topics; returns each topic's LogConfig for ``LogManager.load``."""
        state = read_json(self._path) or {}
        for name, t in sorted(state.get("topics", {}).items()):
            try:
                overrides = parse_topic_overrides(t.get("configs", {}))
            except ConfigError as e:
                raise RuntimeError(f"stored config of topic {name} is invalid: {e}") from None
            info = TopicInfo(name, uuid.UUID(t["id"]), int(t["partitions"]), overrides)
            if self._remote_enabled(info) and not self._broker.remote_storage_system_enabled:
                raise RuntimeError(
                    "You have to delete all topics with the property remote.storage.enable=true "
                    f"before disabling tiered storage cluster-wide (topic {name})"
                )
            self._add(info)
        return {t.name: self.log_config(t) for t in self._topics.values()}

    def attach_logs(self) -> None:
        """Reconcile with the logs found on disk after ``LogManager.load``.

        Missing partition logs are created (a crash between saving the topic and creating its
        logs), except in cluster mode, where the replication layer opens the hosted ones.
        Partition directories of topics we have no record of are adopted with their stored
        topic id and default configs rather than ignored, so data is never orphaned. A log
        found without its ``partition.metadata`` (a crash right after its directory was made)
        takes its topic's id.
        """
        for info in self._topics.values():
            cfg = self.log_config(info)
            for p in range(info.partitions):
                tp = TopicPartition(info.name, p)
                plog = self._logs.get_log(tp)
                if plog is None:
                    if not self.hosted_logs_only:
                        self._logs.create_log(tp, info.topic_id, cfg)
                elif plog.topic_id is None:
                    plog.assign_topic_id(info.topic_id)
            self._logs.update_config(info.name, cfg)
        orphans: dict[str, int] = {}
        stored_ids: dict[str, uuid.UUID] = {}
        for plog in self._logs.all_logs():
            tp = plog.tp
            if tp.topic not in self._topics:
                orphans[tp.topic] = max(orphans.get(tp.topic, 0), tp.partition + 1)
                if plog.topic_id is not None:
                    stored_ids.setdefault(tp.topic, plog.topic_id)
        for name, count in sorted(orphans.items()):
            tid = stored_ids.get(name) or uuid.uuid4()
            info = TopicInfo(name, tid, count, {})
            self._add(info)
            log.warning("adopted topic %s (%s) found on disk without a definition", name, tid)
            for p in range(count):
                tp = TopicPartition(name, p)
                plog = self._logs.get_log(tp)
                if plog is None:
                    if not self.hosted_logs_only:
                        self._logs.create_log(tp, tid, self.log_config(info))
                elif plog.topic_id is None:
                    plog.assign_topic_id(tid)
        if orphans:
            self._save()

    def _save(self) -> None:
        write_json(
            self._path,
            {
                "topics": {
                    t.name: {
                        "id": str(t.topic_id),
                        "partitions": t.partitions,
                        "configs": render_overrides(t.overrides),
                    }
                    for t in self._topics.values()
                }
            },
        )

    def _add(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    # ---- queries ------------------------------------------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return list(self._topics.values())

    def get_log(self, topic: str, partition: int) -> Any:
        info = self._topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self._logs.get_log(TopicPartition(topic, partition))

    def open_log(self, topic: str, partition: int) -> Any:
        """The partition's log, created empty if this broker has none yet (a replica it
        starts hosting); None if the topic or partition is not defined here."""
        info = self._topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self._logs.create_log(
            TopicPartition(topic, partition), info.topic_id, self.log_config(info)
        )

    def close_log(self, topic: str, partition: int) -> Path | None:
        """Stop holding the partition's log (a replica this broker no longer hosts): it is
        forgotten at once and its files renamed for deletion; the renamed dir is returned
        for the caller to delete off the event loop (None: there was no log)."""
        tp = TopicPartition(topic, partition)
        if self._logs.get_log(tp) is None:
            return None
        path: Path | None = self._logs.delete_log(tp, remove=False)
        return path

    def reconfigure(self, broker: BrokerConfig) -> None:
        """New broker defaults (a dynamic ``log.*`` change): every topic without its own
        override takes them, its logs at once, as Kafka's ``DynamicLogConfig`` does."""
        self._broker = broker
        self._logs.default_config = log_config_for({}, broker)
        for info in self._topics.values():
            self._logs.update_config(info.name, self.log_config(info))

    def log_config(self, info: TopicInfo) -> LogConfig:
        return log_config_for(info.overrides, self._broker, internal=info.internal)

    def effective_config(self, info: TopicInfo) -> dict[str, Any]:
        return effective_topic_config(info.overrides, self._broker)

    def _remote_enabled(self, info: TopicInfo) -> bool:
        return bool(self.effective_config(info)["remote.storage.enable"]) and not info.internal

    # ---- admin operations ---------------------------------------------------------------
    def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        key = collision_key(name)
        clash = next((t for t in self._topics if collision_key(t) == key), None)
        if clash is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {clash}",
            )
        if "." in name and "_" in name:
            log.warning(
                "topic %s uses both '.' and '_'; it could collide with another topic in "
                "metric names",
                name,
            )
        partitions = self._broker.num_partitions if num_partitions == -1 else num_partitions
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions must be in [1, {MAX_PARTITIONS}].",
            )
        rf = (
            self._broker.default_replication_factor
            if replication_factor == -1
            else replication_factor
        )
        if rf != 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: 1.",
            )
        overrides = self._parse_and_validate(configs or {}, internal=name in INTERNAL_TOPICS)
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, overrides)
        if validate_only:
            return info
        self._add(info)
        cfg = self.log_config(info)
        if not self.hosted_logs_only:
            for p in range(partitions):
                self._logs.create_log(TopicPartition(name, p), info.topic_id, cfg)
        self._save()
        log.info("created topic %s (%s) with %d partitions", name, info.topic_id, partitions)
        return info

    def ensure(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Get or create (for internal topics such as ``__consumer_offsets``)."""
        info = self._topics.get(name)
        if info is not None:
            return info
        return self.create(name, partitions, 1, configs)

    def delete(self, name: str) -> TopicInfo:
        info = self._require(name)
        del self._topics[name]
        self._by_id.pop(info.topic_id, None)
        self._save()
        for p in range(info.partitions):
            self._logs.delete_log(TopicPartition(name, p))
        log.info("deleted topic %s", name)
        return info

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        info = self._require(name)
        if count < info.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {info.partitions} partitions, which is higher than the "
                f"requested {count}.",
            )
        if count == info.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {info.partitions} partitions."
            )
        if count > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS} partitions.")
        if validate_only:
            return
        cfg = self.log_config(info)
        if not self.hosted_logs_only:
            for p in range(info.partitions, count):
                self._logs.create_log(TopicPartition(name, p), info.topic_id, cfg)
        info.partitions = count
        self._save()

    def replace_configs(
        self, name: str, configs: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None:
        """AlterConfigs: the given set becomes the topic's complete override set."""
        info = self._require(name)
        overrides = self._parse_and_validate(configs, internal=info.internal, previous=info)
        if not validate_only:
            self._apply(info, overrides)

    def has_overrides(self, name: str, configs: Mapping[str, str | None]) -> bool:
        """Whether ``configs``, parsed, are the topic's overrides already."""
        try:
            return parse_topic_overrides(configs) == self._require(name).overrides
        except ConfigError:
            return False

    def overrides(self, name: str) -> dict[str, str]:
        """The topic's overrides as text, as AlterConfigs takes them."""
        return render_overrides(self._require(name).overrides)

    def altered(
        self, raw: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]]
    ) -> dict[str, str | None]:
        """IncrementalAlterConfigs' result on the override set ``raw``: op 0 SET, 1 DELETE,
        2 APPEND, 3 SUBTRACT (list keys; a key without an override starts from the broker's
        default)."""
        out: dict[str, str | None] = dict(raw)
        for key, op, value in ops:
            if key not in out and op in (2, 3):
                current = effective_topic_config({}, self._broker).get(key)
                out[key] = ",".join(current) if isinstance(current, list) else None
            if op == 0:
                out[key] = value
            elif op == 1:
                out.pop(key, None)
            elif op in (2, 3):
                out[key] = list_op(out.get(key), value, op)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
        return out

    def describe_configs(
        self, name: str, keys: Iterable[str] | None, include_synonyms: bool
    ) -> list[ConfigEntry]:
        info = self._require(name)
        return describe_topic_config(
            info.overrides,
            self._broker,
            include_synonyms=include_synonyms,
            only=set(keys) if keys is not None else None,
        )

    # ---- helpers ------------------------------------------------------------------------
    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        return info

    def _parse_and_validate(
        self,
        configs: Mapping[str, str | None],
        *,
        internal: bool,
        previous: TopicInfo | None = None,
    ) -> dict[str, Any]:
        try:
            overrides = parse_topic_overrides(configs)
            validate_topic_config(
                overrides,
                self._broker,
                self.effective_config(previous) if previous is not None else None,
                internal=internal,
            )
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        return overrides

    def _apply(self, info: TopicInfo, overrides: dict[str, Any]) -> None:
        info.overrides = overrides
        self._save()
        self._logs.update_config(info.name, self.log_config(info))
