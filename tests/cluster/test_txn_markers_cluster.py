"""Transaction markers in the three-broker cluster (real ``tierlog serve`` processes, real
ZooKeeper), this test playing the coordinator over the wire: WriteTxnMarkers is answered by
the leader once the marker is replicated (acks=all), followers replay markers into their
producer state and ``.txnindex``, and a new leader elected after ``kill -9`` keeps the open
transaction's LSO and the aborts."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient

from tests.cluster.test_replication import _create_topic, _start_cluster, _state, _wait_hosted
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.txn_wire import (
    NO_VERIFICATION,
    consume_committed,
    fetch,
    produce_txn,
    write_markers,
)
from tierlog.client import WireConnection
from tierlog.log.txn_index import AbortedTxn, read_aborted_txns
from tierlog.protocol.errors import ErrorCode

TOPIC = "replicated"
A, B = 501, 502


def _aborts(broker: BrokerProcess) -> list[AbortedTxn]:
    d = broker.log_dir / f"{TOPIC}-0"
    return [t for p in sorted(d.glob("*.txnindex")) for t in read_aborted_txns(p)]


def test_markers_are_replicated_before_the_answer_and_survive_leader_failover(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = _start_cluster(broker_factory, zk_connect, kazoo_client, extra=NO_VERIFICATION)
    _create_topic(",".join(b.bootstrap for b in brokers.values()))
    _wait_hosted(brokers, kazoo_client)
    state = _state(kazoo_client)
    assert state is not None
    leader = brokers[state.leader]
    follower = next(b for i, b in brokers.items() if i != state.leader)

    with WireConnection(*leader.host_port) as conn:
        assert produce_txn(conn, TOPIC, 0, [b"a0", b"a1"], producer_id=A) == (0, 0)
        with WireConnection(*follower.host_port) as other:
            refused = write_markers(other, [(TOPIC, 0)], producer_id=A, commit=False)
        assert refused == {(TOPIC, 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        assert write_markers(conn, [(TOPIC, 0)], producer_id=A, commit=False) == {(TOPIC, 0): 0}
        # answered once replicated: every replica of the full ISR indexed the abort already
        for b in brokers.values():
            assert _aborts(b) == [AbortedTxn(A, 0, 2, 3)], b.log_dir
        assert produce_txn(conn, TOPIC, 0, [b"b3"], producer_id=B) == (0, 3)
        assert produce_txn(conn, TOPIC, 0, [b"plain"], producer_id=-1, transactional=False)[0] == 0
        assert fetch(conn, TOPIC, 0, 0).last_stable_offset == 3

    leader.kill()

    def new_leader_id() -> int | None:
        s = _state(kazoo_client)
        return s.leader if s is not None and s.leader not in (state.leader, -1) else None

    new_leader = brokers[wait_until(new_leader_id, 30, what="a new leader")]
    with WireConnection(*new_leader.host_port) as conn:
        wait_until(
            lambda: fetch(conn, TOPIC, 0, 0).error_code == 0, 30, what="the new leader serving"
        )
        assert fetch(conn, TOPIC, 0, 0).last_stable_offset == 3  # B is still open
        assert consume_committed(conn, TOPIC, 0) == ([], 3)
        assert write_markers(
            conn, [(TOPIC, 0)], producer_id=B, commit=True, coordinator_epoch=1
        ) == {(TOPIC, 0): 0}
        values, lso = consume_committed(conn, TOPIC, 0)
        assert values == [b"b3", b"plain"]
        assert lso == 6
