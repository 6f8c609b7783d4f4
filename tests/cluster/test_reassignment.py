"""Partition reassignment (KIP-455; spec §6.9): the replica-set arithmetic, and real brokers
moving a partition through ``tierlog reassign-partitions`` and the wire APIs 45/46."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from functools import partial
from pathlib import Path

from kazoo.client import KazooClient

from tests.helpers import cluster as c
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster.cluster_view import PartitionInfo
from tierlog.cluster.reassignment import Reassignment, completion_state
from tierlog.cluster.znodes import PartitionState
from tierlog.protocol.api_keys import ApiKey


def test_reassign_to_follows_kafkas_replica_sets() -> None:
    """RS = TRS then the ORS members not in TRS; AR = TRS - ORS; RR = ORS - TRS; replacing
    a reassignment in flight starts from the same ORS (the controller docs' example)."""
    moving = Reassignment((1, 2, 3)).reassign_to([4, 5, 6])
    assert moving == Reassignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert moving.origin == (1, 2, 3) and moving.target == (4, 5, 6)
    replaced = moving.reassign_to([1, 4])
    assert replaced == Reassignment((1, 4, 2, 3), (4,), (2, 3))
    assert Reassignment(moving.origin) == Reassignment((1, 2, 3)), "cancel = back to ORS"


def test_completion_waits_for_the_target_in_the_isr_then_moves_the_leader() -> None:
    info = PartitionInfo(
        "t",
        0,
        (4, 5, 1, 2),
        adding=(4, 5),
        removing=(1, 2),
        state=PartitionState(1, 7, (1, 2, 4), 3),
    )
    assert completion_state(info, {1, 2, 4, 5}, 3) is None, "5 is not in the ISR yet"
    caught_up = PartitionInfo(
        "t", 0, info.replicas, info.adding, info.removing, PartitionState(1, 7, (1, 2, 4, 5), 3)
    )
    done = completion_state(caught_up, {1, 2, 4, 5}, 3)
    assert done == PartitionState(4, 8, (4, 5), 3)


def _write_plan(tmp_path: Path, topic: str, replicas: list[int]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}
        )
    )
    return path


def _settled(kazoo: KazooClient, topic: str, target: list[int]) -> bool:
    a = c.assignment(kazoo, topic)
    s = c.state(kazoo, topic)
    return (
        a is not None
        and list(a.partitions[0]) == target
        and not a.adding
        and not a.removing
        and s is not None
        and s.leader in target
        and sorted(s.isr) == sorted(target)
    )


def _local_bytes(broker: BrokerProcess, partition_dir: str, expected: int) -> bool:
    """Whether the record bytes of a partition's local segments on ``broker`` are
    ``expected``."""
    logs = (broker.log_dir / partition_dir).glob("*.log")
    return sum(f.stat().st_size for f in logs) == expected


def test_reassignment_adds_catches_up_switches_leader_and_removes(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> None:
    """``tierlog reassign-partitions --execute`` moves an RF=1 partition from broker 1 to
    [2, 3]: the new replicas catch up and join the ISR, leadership moves into the target and
    broker 1 leaves, deleting its local copy; ``--verify`` reports completion and every record
    reads back."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client)
    c.create_topic(brokers, kazoo_client, "mv", [[1]])
    values = [b"m%03d" % i for i in range(50)]
    c.produce(c.bootstrap(brokers), "mv", values)
    assert not _local_bytes(brokers[1], "mv-0", 0)
    before = c.state(kazoo_client, "mv")
    assert before is not None
    plan = _write_plan(tmp_path, "mv", [2, 3])
    out = c.run_cli(
        "reassign-partitions",
        "--bootstrap-server",
        brokers[1].bootstrap,
        "--reassignment-json-file",
        str(plan),
        "--execute",
    )
    assert out.returncode == 0, out.stderr
    assert '"replicas": [1]' in out.stdout
    assert "Successfully started partition reassignments for mv-0" in out.stdout
    wait_until(partial(_settled, kazoo_client, "mv", [2, 3]), 30, what="reassignment done")
    after = c.state(kazoo_client, "mv")
    assert after is not None and after.leader_epoch > before.leader_epoch
    verify = c.run_cli(
        "reassign-partitions",
        "--bootstrap-server",
        brokers[1].bootstrap,
        "--reassignment-json-file",
        str(plan),
        "--verify",
    )
    assert "Reassignment of partition mv-0 is completed." in verify.stdout, verify
    wait_until(
        partial(_local_bytes, brokers[1], "mv-0", 0),
        30,
        what="the removed replica's local log deleted",
    )
    assert c.consume(c.bootstrap(brokers), "mv", 0, len(values)) == values
    c.produce(c.bootstrap(brokers), "mv", [b"after"])
    assert c.consume(c.bootstrap(brokers), "mv", 0, len(values) + 1)[-1] == b"after"


def _alter(bootstrap: str, topic: str, replicas: list[int] | None) -> tuple[int, int]:
    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            timeout=10000,
            topics=[{"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}],
        )
    return int(r.error_code), int(r.responses[0].partitions[0].error_code)


def _listed(bootstrap: str) -> tuple[int, list[tuple[str, int, list[int], list[int], list[int]]]]:
    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout=10000, topics=None)
    return int(r.error_code), [
        (
            t.name,
            int(p.partition_index),
            [int(x) for x in p.replicas],
            [int(x) for x in p.adding_replicas],
            [int(x) for x in p.removing_replicas],
        )
        for t in r.topics
        for p in t.partitions
    ]


def test_cancel_returns_to_the_original_replicas_and_list_shows_progress(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """A reassignment whose new replica cannot catch up (its broker is frozen) is listed by
    ListPartitionReassignments with its adding/removing sets; cancelling it (null replicas)
    restores the original replica set, and a second cancel answers
    NO_REASSIGNMENT_IN_PROGRESS. Elsewhere than the controller: NOT_CONTROLLER; invalid
    lists: INVALID_REPLICA_ASSIGNMENT."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client)
    controller_id = c.controller_of(kazoo_client)
    frozen_id = max(i for i in brokers if i != controller_id)
    a, b = sorted(i for i in brokers if i != frozen_id)
    c.create_topic(brokers, kazoo_client, "cx", [[a, b]])
    controller = brokers[controller_id].bootstrap
    assert _alter(brokers[frozen_id].bootstrap, "cx", [a, frozen_id])[0] == 41, "NOT_CONTROLLER"
    assert _alter(controller, "cx", [])[1] == 39
    assert _alter(controller, "cx", [a, a])[1] == 39
    assert _alter(controller, "cx", [a, 9])[1] == 39, "broker 9 is not live"
    frozen = brokers[frozen_id]
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        assert _alter(controller, "cx", [a, frozen_id]) == (0, 0)
        code, listed = _listed(controller)
        assert code == 0
        assert listed == [("cx", 0, [a, frozen_id, b], [frozen_id], [b])]
        assert _alter(controller, "cx", None) == (0, 0)
        wait_until(partial(_settled, kazoo_client, "cx", [a, b]), 30, what="back to the origin")
        assert _listed(controller) == (0, [])
        assert _alter(controller, "cx", None)[1] == 85, "NO_REASSIGNMENT_IN_PROGRESS"
    finally:
        os.kill(frozen.pid, signal.SIGCONT)


def test_a_reassignment_survives_the_controllers_kill_9(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    """Spec §9 scenario 29: the reassignment lives in the topic znode, so when the controller
    that started it is killed before it can complete (the new replica's broker is frozen),
    the next controller completes it once that replica catches up."""
    brokers = c.start_cluster(broker_factory, zk_connect, kazoo_client)
    first = c.controller_of(kazoo_client)
    frozen_id = max(i for i in brokers if i != first)
    kept = next(i for i in brokers if i not in (first, frozen_id))
    c.create_topic(brokers, kazoo_client, "fo", [[kept]])
    values = [b"f%02d" % i for i in range(10)]
    c.produce(c.bootstrap(brokers), "fo", values)
    frozen = brokers[frozen_id]
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        assert _alter(brokers[first].bootstrap, "fo", [kept, frozen_id]) == (0, 0)
        brokers[first].kill()
        wait_until(
            lambda: (cid := c.controller_of(kazoo_client)) != first and cid,
            30,
            what="another controller",
        )
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    wait_until(
        partial(_settled, kazoo_client, "fo", [kept, frozen_id]), 60, what="reassignment done"
    )
    brokers[first].start()
    assert c.consume(frozen.bootstrap, "fo", 0, len(values)) == values
