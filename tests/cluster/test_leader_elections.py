"""ElectLeaders (API 43) on real brokers (spec Z-12): confluent-kafka's ``elect_leaders``
and ``tierlog leader-election``, with Kafka's per-partition error codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import confluent_kafka
from confluent_kafka import ElectionType
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster.znodes import LEADER_RECOVERY_RECOVERING, NO_LEADER
from tierlog.protocol.api_keys import ApiKey

NO_REBALANCE = {"auto.leader.rebalance.enable": "false"}


def _leader_is(kazoo: KazooClient, topic: str, leader: int) -> bool:
    s = c.state(kazoo, topic)
    return s is not None and s.leader == leader


def _full_isr(kazoo: KazooClient, topic: str, isr: list[int]) -> bool:
    s = c.state(kazoo, topic)
    return s is not None and sorted(s.isr) == isr


def _elect(bootstrap: str, election: ElectionType, topic: str) -> int:
    """The partition's error code (0 when elected) through confluent-kafka's AdminClient."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = confluent_kafka.TopicPartition(topic, 0)
    result = admin.elect_leaders(election, [tp]).result(30)
    (error,) = result.values()
    return 0 if error is None else int(error.code())


def test_preferred_election_moves_leadership_back_and_is_not_needed_twice(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """After a controlled shutdown moved leadership off the preferred replica and it came
    back, a PREFERRED election (confluent-kafka's AdminClient) returns leadership to A[0]
    with a higher leader epoch; asked again it answers ELECTION_NOT_NEEDED (84). A broker
    that is not the controller answers NOT_CONTROLLER (41) on the wire."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, extra=NO_REBALANCE)
    c.create_topic(brokers, kazoo_client, "pe", [[1, 2, 3]])
    assert brokers[1].stop() == 0
    wait_until(lambda: not _leader_is(kazoo_client, "pe", 1), 20, what="leadership moved")
    brokers[1].start()
    wait_until(partial(_full_isr, kazoo_client, "pe", [1, 2, 3]), 30, what="1 back in the ISR")
    before = c.state(kazoo_client, "pe")
    assert before is not None and before.leader != 1
    assert _elect(c.bootstrap(brokers), ElectionType.PREFERRED, "pe") == 0
    after = c.state(kazoo_client, "pe")
    assert after is not None and after.leader == 1 and after.leader_epoch > before.leader_epoch
    assert sorted(after.isr) == [1, 2, 3]
    assert _elect(c.bootstrap(brokers), ElectionType.PREFERRED, "pe") == 84
    c.produce(c.bootstrap(brokers), "pe", [b"after"])

    other = next(b for i, b in brokers.items() if i != c.controller_of(kazoo_client))
    with WireConnection.to_bootstrap(other.bootstrap) as conn:
        r = conn.call(
            ApiKey.ELECT_LEADERS,
            2,
            election_type=0,
            timeout=5000,
            topic_partitions=[{"topic": "pe", "partitions": [0]}],
        )
    assert int(r.error_code) == 41
    assert int(r.replica_election_results[0].partition_result[0].error_code) == 41


def test_unclean_election_elects_an_out_of_sync_replica_on_request(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> None:
    """With unclean election disabled, a partition whose only ISR member died stays
    offline; ``tierlog leader-election --election-type preferred`` answers
    PREFERRED_LEADER_NOT_AVAILABLE (80), ``--election-type unclean`` elects the live
    out-of-sync replica (RECOVERING, higher epoch), then reports it already elected; a
    partition with no live replica answers ELIGIBLE_LEADERS_NOT_AVAILABLE (83)."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client, extra=NO_REBALANCE)
    c.create_topic(brokers, kazoo_client, "un", [[1, 2]])
    c.create_topic(brokers, kazoo_client, "dead", [[1]])
    brokers[2].stop()
    wait_until(partial(_full_isr, kazoo_client, "un", [1]), 20, what="ISR shrunk to 1")
    brokers[1].kill()
    offline = wait_until(
        lambda: c.state_when(kazoo_client, "un", lambda s: s.leader == NO_LEADER),
        20,
        what="the partition offline",
    )
    brokers[2].start()
    bootstrap = c.bootstrap(brokers)

    def elect(kind: str, *target: str) -> tuple[int, str]:
        out = c.run_cli(
            "leader-election", "--bootstrap-server", bootstrap, "--election-type", kind, *target
        )
        return out.returncode, out.stdout + out.stderr

    code, out = elect("preferred", "--topic", "un", "--partition", "0")
    assert code == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in out, out
    plan = tmp_path / "elect.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "un", "partition": 0}]}))
    code, out = elect("unclean", "--path-to-json-file", str(plan))
    assert (
        code == 0 and "Successfully completed leader election (UNCLEAN) for partitions un-0" in out
    )
    elected = c.state(kazoo_client, "un")
    assert elected is not None and elected.leader == 2 and list(elected.isr) == [2]
    assert elected.leader_recovery_state == LEADER_RECOVERY_RECOVERING
    assert elected.leader_epoch > offline.leader_epoch
    code, out = elect("unclean", "--topic", "un", "--partition", "0")
    assert code == 0 and "Valid replica already elected for partitions un-0" in out, out
    code, out = elect("unclean", "--topic", "dead", "--partition", "0")
    assert code == 1 and "ELIGIBLE_LEADERS_NOT_AVAILABLE" in out, out
    c.produce(bootstrap, "un", [b"on the unclean leader"])
