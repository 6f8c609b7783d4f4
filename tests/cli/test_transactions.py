"""``tierlog transactions`` (Kafka's ``kafka-transactions.sh``) as an operator runs it to
find and end the transaction that holds read_committed consumers.

One broker serves the module, with KIP-890 verification off so that a test can write a
transactional batch for a producer no coordinator knows: the hanging transaction Kafka's
tool exists for. ``held`` is a real transaction a confluent-kafka producer opened and never
ended (3 plain records first on partition 0, then its records on partitions 0 and 1)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import confluent_kafka as ck
import pytest

from tests.cli.txn_helpers import MINUTE_MS, now_ms, producer_of, rows, stable_and_high, txn_cli
from tests.helpers.broker import BrokerProcess
from tests.helpers.txn_clients import read_all, transactional_producer
from tests.helpers.txn_wire import NO_VERIFICATION, produce_txn
from tests.helpers.wire import closed_port
from tierlog.cli import main
from tierlog.client import WireConnection

HELD_TOPIC = "held"
HELD_TID = "stuck-app"
TIMEOUT_MS = 600_000


@dataclass(frozen=True)
class Held:
    bootstrap: str
    producer_id: int
    producer_epoch: int
    opened_ms: int


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-broker"), NO_VERIFICATION)
    b.start()
    yield b
    b.close()


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    with WireConnection.to_bootstrap(bootstrap) as conn:
        code, message = conn.create_topic(topic, partitions)
    assert code == 0, message


@pytest.fixture(scope="module")
def held(txn_broker: BrokerProcess) -> Iterator[Held]:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, HELD_TOPIC, 2)
    plain = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3):
        plain.produce(HELD_TOPIC, b"plain-%d" % i, partition=0)
    assert plain.flush(30) == 0
    opened_ms = now_ms()
    producer = transactional_producer(bootstrap, HELD_TID, **{"transaction.timeout.ms": TIMEOUT_MS})
    producer.begin_transaction()
    for p in (0, 1):
        producer.produce(HELD_TOPIC, b"pending", partition=p)
    assert producer.flush(30) == 0
    pid, epoch = producer_of(bootstrap, HELD_TID)
    yield Held(bootstrap, pid, epoch, opened_ms)
    producer.abort_transaction(30)


def _ghost(bootstrap: str, topic: str, producer_id: int, age_ms: int, values: int = 2) -> int:
    """A transactional batch of a producer no coordinator knows, last written ``age_ms``
    ago (the hang Kafka's tool looks for): its base offset."""
    with WireConnection.to_bootstrap(bootstrap) as conn:
        code, offset = produce_txn(
            conn,
            topic,
            0,
            [b"ghost-%d" % i for i in range(values)],
            producer_id=producer_id,
            transactional_id=None,
            timestamp=now_ms() - age_ms,
        )
    assert code == 0
    return offset


def test_list_shows_the_open_transaction_and_filters_by_state_and_producer(held: Held) -> None:
    listed = txn_cli(held.bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    assert {
        "TransactionalId": HELD_TID,
        "Coordinator": "0",
        "ProducerId": str(held.producer_id),
        "TransactionState": "Ongoing",
    } in rows(listed.stdout)

    def ids(*filters: str) -> list[str]:
        r = txn_cli(held.bootstrap, "list", *filters)
        assert r.returncode == 0, r.stderr
        return [x["TransactionalId"] for x in rows(r.stdout)]

    assert HELD_TID in ids("--state", "Ongoing")
    assert HELD_TID not in ids("--state", "CompleteCommit")
    assert ids("--producer-id", str(held.producer_id)) == [HELD_TID]
    assert ids("--producer-id", str(held.producer_id + 1000)) == []


def test_describe_shows_state_timeout_start_and_partitions(held: Held) -> None:
    before = now_ms()
    r = txn_cli(held.bootstrap, "describe", "--transactional-id", HELD_TID)
    assert r.returncode == 0, r.stderr
    (row,) = rows(r.stdout)
    assert {
        k: row[k]
        for k in row
        if k not in ("CurrentTransactionStartTimeMs", "TransactionDurationMs")
    } == {
        "CoordinatorId": "0",
        "TransactionalId": HELD_TID,
        "ProducerId": str(held.producer_id),
        "ProducerEpoch": str(held.producer_epoch),
        "TransactionState": "Ongoing",
        "TransactionTimeoutMs": str(TIMEOUT_MS),
        "TopicPartitions": f"{HELD_TOPIC}-0,{HELD_TOPIC}-1",
    }
    started = int(row["CurrentTransactionStartTimeMs"])
    assert held.opened_ms <= started <= before
    assert int(row["TransactionDurationMs"]) >= before - started


def test_describe_of_an_unknown_transactional_id_fails(held: Held) -> None:
    r = txn_cli(held.bootstrap, "describe", "--transactional-id", "never-used")
    assert r.returncode == 1
    assert (
        "Error: Failed to describe transaction state of transactional-id `never-used`: "
        "TRANSACTIONAL_ID_NOT_FOUND" in r.stderr
    )


def test_describe_producers_shows_where_the_open_transaction_starts(held: Held) -> None:
    for extra in ([], ["--broker-id", "0"]):
        r = txn_cli(
            held.bootstrap, "describe-producers", "--topic", HELD_TOPIC, "--partition", "0", *extra
        )
        assert r.returncode == 0, r.stderr
        by_producer = {x["ProducerId"]: x for x in rows(r.stdout)}
        assert by_producer[str(held.producer_id)]["CurrentTransactionStartOffset"] == "3"
        assert by_producer[str(held.producer_id)]["LatestCoordinatorEpoch"] == "-1"
        plain = [x for pid, x in by_producer.items() if pid != str(held.producer_id)]
        assert [x["CurrentTransactionStartOffset"] for x in plain] == ["None"]
        assert [x["LastSequence"] for x in plain] == ["2"]


def test_describe_producers_of_a_missing_partition_fails(held: Held) -> None:
    r = txn_cli(held.bootstrap, "describe-producers", "--topic", HELD_TOPIC, "--partition", "9")
    assert r.returncode == 1
    assert (
        f"Failed to describe producers for partition {HELD_TOPIC}-9 on leader: "
        "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    )


def test_find_hanging_reports_a_transaction_no_coordinator_knows(held: Held) -> None:
    """Older than the default 15 minutes it is found; a fresh one only once the maximum
    timeout is below its age."""
    _create(held.bootstrap, "ghosts")
    old = _ghost(held.bootstrap, "ghosts", 900_001, age_ms=20 * MINUTE_MS)
    r = txn_cli(held.bootstrap, "find-hanging", "--broker-id", "0")
    assert r.returncode == 0, r.stderr
    found = [x for x in rows(r.stdout) if x["Topic"] == "ghosts"]
    assert [(x["Partition"], x["ProducerId"], x["StartOffset"]) for x in found] == [
        ("0", "900001", str(old))
    ]
    assert int(found[0]["Duration(min)"]) >= 20 and found[0]["CoordinatorEpoch"] == "-1"

    _create(held.bootstrap, "fresh-ghost")
    _ghost(held.bootstrap, "fresh-ghost", 900_002, age_ms=0)
    scope = ["--topic", "fresh-ghost", "--partition", "0"]
    default = txn_cli(held.bootstrap, "find-hanging", *scope)
    assert default.returncode == 0, default.stderr
    assert rows(default.stdout) == []
    zero = txn_cli(held.bootstrap, "find-hanging", *scope, "--max-transaction-timeout", "0")
    assert [x["ProducerId"] for x in rows(zero.stdout)] == ["900002"]


def test_find_hanging_leaves_out_an_ongoing_transaction_its_coordinator_lists(
    held: Held,
) -> None:
    """Older than ``--max-transaction-timeout 0`` but its coordinator still lists the
    partition: its coordinator will end it, so Kafka's rule does not call it hanging."""
    r = txn_cli(
        held.bootstrap, "find-hanging", "--topic", HELD_TOPIC, "--max-transaction-timeout", "0"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]


def test_abort_by_start_offset_lets_a_read_committed_consumer_past_the_hang(
    held: Held,
) -> None:
    """A confluent-kafka transaction left open holds the LSO at its first offset; the
    operator finds that offset with ``describe-producers`` and aborts there."""
    topic = "blocked"
    _create(held.bootstrap, topic)
    stuck = transactional_producer(
        held.bootstrap, "blocked-app", **{"transaction.timeout.ms": TIMEOUT_MS}
    )
    stuck.begin_transaction()
    stuck.produce(topic, b"never-committed", partition=0)
    assert stuck.flush(30) == 0
    after = ck.Producer({"bootstrap.servers": held.bootstrap})
    for v in (b"after-0", b"after-1"):
        after.produce(topic, v, partition=0)
    assert after.flush(30) == 0
    assert stable_and_high(held.bootstrap, topic, 0) == (0, 3)

    described = txn_cli(held.bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    (start,) = [
        x["CurrentTransactionStartOffset"]
        for x in rows(described.stdout)
        if x["CurrentTransactionStartOffset"] != "None"
    ]
    r = txn_cli(
        held.bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", start
    )
    assert r.returncode == 0, r.stderr
    assert read_all(held.bootstrap, topic, "read_committed", expect=2) == [b"after-0", b"after-1"]


def test_abort_with_explicit_producer_fields_ends_the_transaction(held: Held) -> None:
    topic = "blocked-explicit"
    _create(held.bootstrap, topic)
    start = _ghost(held.bootstrap, topic, 900_004, age_ms=0)
    assert stable_and_high(held.bootstrap, topic, 0) == (start, start + 2)
    r = txn_cli(
        held.bootstrap,
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--producer-id",
        "900004",
        "--producer-epoch",
        "0",
        "--coordinator-epoch",
        "-1",
    )
    assert r.returncode == 0, r.stderr
    stable, high = stable_and_high(held.bootstrap, topic, 0)
    assert stable == high == start + 3


def test_abort_where_no_transaction_starts_fails(held: Held) -> None:
    r = txn_cli(
        held.bootstrap, "abort", "--topic", HELD_TOPIC, "--partition", "0", "--start-offset", "1"
    )
    assert r.returncode == 1
    assert (
        f"Error: Could not find any open transactions starting at offset 1 on partition "
        f"{HELD_TOPIC}-0" in r.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["abort", "--topic", "t", "--partition", "0"],
            "The transaction to abort must be identified either with --start-offset",
        ),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "5"],
            "Missing required argument --producer-epoch",
        ),
        (
            [
                "abort",
                "--topic",
                "t",
                "--partition",
                "0",
                "--producer-id",
                "5",
                "--producer-epoch",
                "0",
            ],
            "Missing required argument --coordinator-epoch",
        ),
        (["find-hanging"], "The `find-hanging` command requires either --topic or --broker-id"),
        (
            ["find-hanging", "--broker-id", "0", "--partition", "0"],
            "The --partition argument requires --topic to be provided",
        ),
        (["list", "--state", "Hanging"], "Invalid state(s) Hanging. Valid states are: Empty"),
    ],
)
def test_bad_options_are_refused_before_connecting(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's messages and exit 1, with no broker at the address (in-process)."""
    with pytest.raises(SystemExit) as exited:
        main(["transactions", "--bootstrap-server", f"127.0.0.1:{closed_port()}", *args])
    assert exited.value.code not in (0, None)
    assert message in str(exited.value.code) + capsys.readouterr().err


def test_required_options_are_those_of_kafkas_tool(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["transactions", "--bootstrap-server", ":1", "describe-producers", "--topic", "t"])
    assert exited.value.code == 2
    assert "the following arguments are required: --partition" in capsys.readouterr().err
