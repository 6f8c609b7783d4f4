"""One small driver per real Kafka client, so the acceptance matrix runs the same scenario
through confluent-kafka, kafka-python, aiokafka and kcat.

Drivers only use each client's public API the way an application would. Waiting is always a
poll with a deadline. Group members run their client in a thread (or, for kcat, a
process) because a rebalance needs every member to keep polling at the same time.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiokafka
import confluent_kafka as ck
import kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.helpers.confluent import consume_assigned

#: (partition, offset, value) as seen by a consumer.
Seen = tuple[int, int, bytes]

CODECS: tuple[str, ...] = ("gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

#: Short heartbeats so that a second member joining is noticed in well under a second.
HEARTBEAT_MS = 300
SESSION_MS = 10_000

#: Kafka's default ``group.initial.rebalance.delay.ms``. kafka-python (3.0.x) loses a
#: JoinGroup/SyncGroup round that completes while no ``poll()`` is waiting for it: the next
#: poll starts a new round instead, or, when the round was the leader's own reaction to
#: topic metadata it lacked at its previous assignment, never looks at the group again
#: (no partitions, heartbeats off, forever). Kafka's default delay holds a new group's
#: first rebalance until every member has its topic metadata, so that leader case does
#: not arise; the tests' zero delay makes it likely.
KAFKA_INITIAL_REBALANCE_DELAY = {"group.initial.rebalance.delay.ms": "3000"}


def kcat_path() -> str:
    path = shutil.which("kcat")
    assert path is not None, "kcat is required (apt-get install -y kcat)"
    return path


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(30)


def values(tag: str, count: int, start: int = 0) -> list[bytes]:
    return [f"{tag}-{i:06d}".encode() for i in range(start, start + count)]


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets as the broker reports them (OffsetFetch, no join)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([ck.TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def _seen_ck(m: ck.Message) -> Seen:
    part, off, value = m.partition(), m.offset(), m.value()
    assert part is not None and off is not None and value is not None
    return part, off, value


# ---- on-disk batches ---------------------------------------------------------------------
@dataclass(frozen=True)
class DiskBatch:
    base_offset: int
    attributes: int
    producer_id: int
    base_sequence: int
    record_count: int

    @property
    def codec(self) -> int:
        return self.attributes & 0x7


_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")


def disk_batches(partition_dir: Path) -> list[DiskBatch]:
    """Batch headers straight from the ``.log`` files (Kafka's v2 layout), in offset order.

    Read independently of tierlog's own record code so the acceptance tests check the bytes
    a Kafka tool would see.
    """
    return [b for path in sorted(partition_dir.glob("*.log")) for b in segment_batches(path)]


def segment_batches(log_file: Path) -> list[DiskBatch]:
    data = log_file.read_bytes()
    out: list[DiskBatch] = []
    pos = 0
    while pos + _BATCH_HEAD.size <= len(data):
        (base, length, _epoch, _magic, _crc, attrs, _lod, _ts0, _ts1, pid, _pe, seq, n) = (
            _BATCH_HEAD.unpack_from(data, pos)
        )
        if length <= 0:
            break  # preallocated or torn tail
        out.append(DiskBatch(base, attrs, pid, seq, n))
        pos += 12 + length
    return out


# ---- the driver interface ------------------------------------------------------------------
class GroupMember(Protocol):
    def start(self) -> None: ...
    def assigned(self) -> set[int]: ...
    def seen(self) -> list[Seen]: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...


class Driver(Protocol):
    name: str
    #: Codecs this client really compresses with when producing to a Kafka 4 protocol broker.
    produce_codecs: tuple[str, ...]

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[int, bytes]],
        *,
        codec: str = "none",
        idempotent: bool = False,
    ) -> None:
        """Send ``(partition, value)`` records and return once every one is acknowledged."""
        ...

    def consume_assigned(
        self, bootstrap: str, topic: str, partition: int, count: int
    ) -> list[Seen]:
        """Read ``count`` records from the start of one partition with assign()."""
        ...

    def member(self, bootstrap: str, topic: str, group: str) -> GroupMember: ...

    #: Broker settings under which this client's group members are tested.
    group_broker_overrides: Mapping[str, str]


# ---- thread-hosted group members -----------------------------------------------------------
class _ThreadMember:
    """Runs ``_run`` in a thread; the thread owns the client (none of them is thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._assigned: set[int] = set()
        self._seen: list[Seen] = []
        self._stop = threading.Event()
        self._commit_wanted = threading.Event()
        self._committed = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported to the test thread by commit()/close()
            self._error = e
            self._committed.set()

    def _run(self) -> None:
        raise NotImplementedError

    def _record(self, assigned: set[int], seen: list[Seen]) -> None:
        with self._lock:
            self._assigned = assigned
            self._seen.extend(seen)

    def assigned(self) -> set[int]:
        self._raise()
        with self._lock:
            return set(self._assigned)

    def seen(self) -> list[Seen]:
        self._raise()
        with self._lock:
            return list(self._seen)

    def commit(self) -> None:
        self._commit_wanted.set()
        assert self._committed.wait(30), "commit not done within 30 s"
        self._raise()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "consumer thread did not stop"
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise AssertionError(f"consumer thread failed: {self._error!r}") from self._error


class _ConfluentMember(_ThreadMember):
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__()
        self._conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "session.timeout.ms": SESSION_MS,
            "fetch.wait.max.ms": 100,
        }
        self._topic = topic

    def _run(self) -> None:
        c = ck.Consumer(self._conf)
        try:
            c.subscribe([self._topic])
            while not self._stop.is_set():
                m = c.poll(0.1)
                seen: list[Seen] = []
                if m is not None:
                    assert m.error() is None, m.error()
                    seen.append(_seen_ck(m))
                self._record({tp.partition for tp in c.assignment()}, seen)
                if self._commit_wanted.is_set() and not self._committed.is_set():
                    c.commit(asynchronous=False)
                    self._committed.set()
        finally:
            c.close()


class _KafkaPythonMember(_ThreadMember):
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__()
        self._bootstrap = bootstrap
        self._topic = topic
        self._group = group

    def _run(self) -> None:
        c = kafka.KafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=self._group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=HEARTBEAT_MS,
            session_timeout_ms=SESSION_MS,
            fetch_max_wait_ms=100,
        )
        try:
            c.subscribe([self._topic])
            while not self._stop.is_set():
                batches = c.poll(timeout_ms=100)
                seen = [(m.partition, m.offset, m.value) for ms in batches.values() for m in ms]
                self._record({tp.partition for tp in c.assignment()}, seen)
                if self._commit_wanted.is_set() and not self._committed.is_set():
                    c.commit()
                    self._committed.set()
        finally:
            c.close()


class _AiokafkaMember(_ThreadMember):
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__()
        self._bootstrap = bootstrap
        self._topic = topic
        self._group = group

    def _run(self) -> None:
        asyncio.run(self._arun())

    async def _arun(self) -> None:
        c = aiokafka.AIOKafkaConsumer(
            self._topic,
            bootstrap_servers=self._bootstrap,
            group_id=self._group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=HEARTBEAT_MS,
            session_timeout_ms=SESSION_MS,
            fetch_max_wait_ms=100,
        )
        await c.start()
        try:
            while not self._stop.is_set():
                batches = await c.getmany(timeout_ms=100)
                seen = [(m.partition, m.offset, m.value) for ms in batches.values() for m in ms]
                self._record({tp.partition for tp in c.assignment()}, seen)
                if self._commit_wanted.is_set() and not self._committed.is_set():
                    await c.commit()
                    self._committed.set()
        finally:
            await c.stop()


# ---- confluent-kafka ---------------------------------------------------------------------
class ConfluentDriver:
    produce_codecs: tuple[str, ...] = CODECS
    group_broker_overrides: Mapping[str, str] = {}
    name = "confluent-kafka"

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[int, bytes]],
        *,
        codec: str = "none",
        idempotent: bool = False,
    ) -> None:
        p = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": idempotent,
                "acks": "all",
                "linger.ms": 5,
            }
        )
        errors: list[Any] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for partition, value in records:
            p.produce(topic, value=value, partition=partition, on_delivery=on_delivery)
            p.poll(0)
        assert p.flush(30) == 0, "records still in flight after 30 s"
        assert errors == []

    def consume_assigned(
        self, bootstrap: str, topic: str, partition: int, count: int
    ) -> list[Seen]:
        got = consume_assigned(bootstrap, topic, partition, count, poll_s=0.2)
        return [_seen_ck(m) for m in got]

    def member(self, bootstrap: str, topic: str, group: str) -> GroupMember:
        return _ConfluentMember(bootstrap, topic, group)


# ---- kafka-python --------------------------------------------------------------------------
class KafkaPythonDriver:
    produce_codecs: tuple[str, ...] = CODECS
    group_broker_overrides: Mapping[str, str] = KAFKA_INITIAL_REBALANCE_DELAY
    name = "kafka-python"

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[int, bytes]],
        *,
        codec: str = "none",
        idempotent: bool = False,
    ) -> None:
        p = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            enable_idempotence=idempotent,
            acks="all",
            linger_ms=5,
        )
        try:
            futures = [p.send(topic, value=v, partition=part) for part, v in records]
            p.flush(30)
            for f in futures:
                f.get(timeout=30)
        finally:
            p.close(10)

    def consume_assigned(
        self, bootstrap: str, topic: str, partition: int, count: int
    ) -> list[Seen]:
        c = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
        )
        got: list[Seen] = []
        try:
            tp = kafka.TopicPartition(topic, partition)
            c.assign([tp])
            c.seek_to_beginning(tp)
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                for m in c.poll(timeout_ms=200).get(tp, []):
                    got.append((m.partition, m.offset, m.value))
        finally:
            c.close()
        return got

    def member(self, bootstrap: str, topic: str, group: str) -> GroupMember:
        return _KafkaPythonMember(bootstrap, topic, group)


# ---- aiokafka ------------------------------------------------------------------------------
class AiokafkaDriver:
    produce_codecs: tuple[str, ...] = CODECS
    group_broker_overrides: Mapping[str, str] = {}
    name = "aiokafka"

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[int, bytes]],
        *,
        codec: str = "none",
        idempotent: bool = False,
    ) -> None:
        async def run() -> None:
            p = aiokafka.AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                compression_type=None if codec == "none" else codec,
                enable_idempotence=idempotent,
                acks="all",
                linger_ms=5,
            )
            await p.start()
            try:
                futures = [await p.send(topic, value=v, partition=part) for part, v in records]
                async with asyncio.timeout(30):
                    await asyncio.gather(*futures)
            finally:
                await p.stop()

        asyncio.run(run())

    def consume_assigned(
        self, bootstrap: str, topic: str, partition: int, count: int
    ) -> list[Seen]:
        async def run() -> list[Seen]:
            c = aiokafka.AIOKafkaConsumer(
                bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
            )
            await c.start()
            got: list[Seen] = []
            try:
                tp = aiokafka.TopicPartition(topic, partition)
                c.assign([tp])
                await c.seek_to_beginning(tp)
                deadline = time.monotonic() + 30
                while len(got) < count and time.monotonic() < deadline:
                    batch = await c.getmany(tp, timeout_ms=200)
                    got += [(m.partition, m.offset, m.value) for m in batch.get(tp, [])]
            finally:
                await c.stop()
            return got

        return asyncio.run(run())

    def member(self, bootstrap: str, topic: str, group: str) -> GroupMember:
        return _AiokafkaMember(bootstrap, topic, group)


# ---- kcat ----------------------------------------------------------------------------------
#: kcat -f format: partition, offset, then the value; one record per line.
_KCAT_FMT = "%p %o %s\\n"


def _parse_kcat(text: str) -> list[Seen]:
    out: list[Seen] = []
    for line in text.splitlines():
        part, off, value = line.split(" ", 2)
        out.append((int(part), int(off), value.encode()))
    return out


class _KcatMember:
    """A ``kcat -G`` balanced consumer; librdkafka auto-commits what kcat has printed."""

    _ASSIGNED = re.compile(r"rebalanced \(.*\): assigned: (.*)$", re.MULTILINE)
    _REVOKED = re.compile(r"rebalanced \(.*\): revoked", re.MULTILINE)

    def __init__(self, bootstrap: str, topic: str, group: str, work_dir: Path) -> None:
        self._cmd = [
            kcat_path(),
            "-b",
            bootstrap,
            "-G",
            group,
            "-u",
            "-f",
            _KCAT_FMT,
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "auto.commit.interval.ms=100",
            "-X",
            f"heartbeat.interval.ms={HEARTBEAT_MS}",
            "-X",
            f"session.timeout.ms={SESSION_MS}",
            "-X",
            "fetch.wait.max.ms=100",
            topic,
        ]
        work_dir.mkdir(parents=True, exist_ok=True)
        self._out = work_dir / "kcat.out"
        self._err = work_dir / "kcat.err"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self._out, "wb") as out, open(self._err, "wb") as err:
            self._proc = subprocess.Popen(self._cmd, stdout=out, stderr=err)

    def assigned(self) -> set[int]:
        assert self._proc is not None and self._proc.poll() is None, self._err.read_text()
        text = self._err.read_text(errors="replace")
        last_assign = None
        for m in self._ASSIGNED.finditer(text):
            last_assign = m
        if last_assign is None:
            return set()
        if any(r.start() > last_assign.start() for r in self._REVOKED.finditer(text)):
            return set()
        return {int(p) for p in re.findall(r"\[(\d+)\]", last_assign.group(1))}

    def seen(self) -> list[Seen]:
        text = self._out.read_text(errors="replace")
        complete = text[: text.rfind("\n") + 1]  # a line may be half written
        return _parse_kcat(complete)

    def commit(self) -> None:
        """kcat has no commit command: its offsets are auto-committed every 100 ms and on
        close; the test checks the broker's committed offsets itself."""

    def close(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGTERM)
        try:
            rc = self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            raise AssertionError("kcat ignored SIGTERM") from None
        assert rc == 0, f"kcat exited with {rc}: {self._err.read_text()[-2000:]}"


class KcatDriver:
    """kcat 1.7.1 bundles librdkafka 2.0.2, which only compresses with gzip, snappy or lz4 if
    the broker advertises Produce v0 (librdkafka issue #4956). A Kafka 4 broker, like
    tierlog, starts at v3 (KIP-896), so this kcat sends those batches uncompressed (it logs
    "Broker does not support compression type"); it still decodes all four when consuming."""

    name = "kcat"
    produce_codecs: tuple[str, ...] = ("zstd",)
    group_broker_overrides: Mapping[str, str] = {}

    def __init__(self, work_dir: Path) -> None:
        self._work_dir = work_dir
        self._members = 0

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[int, bytes]],
        *,
        codec: str = "none",
        idempotent: bool = False,
    ) -> None:
        by_partition: dict[int, list[bytes]] = {}
        for part, v in records:
            by_partition.setdefault(part, []).append(v)
        for part, vs in by_partition.items():
            cmd = [kcat_path(), "-P", "-b", bootstrap, "-t", topic, "-p", str(part)]
            cmd += ["-z", codec, "-X", "acks=all", "-X", "linger.ms=5"]
            if idempotent:
                cmd += ["-X", "enable.idempotence=true"]
            subprocess.run(
                cmd, input=b"\n".join(vs) + b"\n", check=True, timeout=60, capture_output=True
            )

    def consume_assigned(
        self, bootstrap: str, topic: str, partition: int, count: int
    ) -> list[Seen]:
        cmd = [kcat_path(), "-C", "-b", bootstrap, "-t", topic, "-p", str(partition)]
        cmd += ["-o", "beginning", "-c", str(count), "-e", "-f", _KCAT_FMT]
        out = subprocess.run(
            cmd,
            capture_output=True,
            check=True,
            timeout=60,
        )
        return _parse_kcat(out.stdout.decode())

    def member(self, bootstrap: str, topic: str, group: str) -> GroupMember:
        self._members += 1
        return _KcatMember(bootstrap, topic, group, self._work_dir / f"member{self._members}")
