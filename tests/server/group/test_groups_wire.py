"""Consumer groups over the wire: two subscribed confluent consumers share a topic, commit,
and after a broker restart a new consumer resumes from the committed offsets."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker import BrokerProcess


def _consumer(b: BrokerProcess, group: str) -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
        }
    )


def test_group_of_two_commits_and_resumes_after_restart(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("grp-t", 4, 1)])["grp-t"].result(30)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(400):
        p.produce("grp-t", value=b"%d" % i, partition=i % 4)
    assert p.flush(30) == 0

    c1, c2 = _consumer(broker, "g"), _consumer(broker, "g")
    c1.subscribe(["grp-t"])
    c2.subscribe(["grp-t"])
    seen: dict[int, set[bytes | None]] = {1: set(), 2: set()}
    deadline = time.monotonic() + 60
    while len(seen[1] | seen[2]) < 200 and time.monotonic() < deadline:
        for n, c in ((1, c1), (2, c2)):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                seen[n].add(m.value())
    # keep polling until both members own partitions (the rebalance may settle late)
    while not (c1.assignment() and c2.assignment()) and time.monotonic() < deadline:
        for c in (c1, c2):
            c.poll(0.2)
    assert c1.assignment() and c2.assignment()
    assigned = {tp.partition for tp in c1.assignment()} | {tp.partition for tp in c2.assignment()}
    assert assigned == {0, 1, 2, 3}
    assert not {tp.partition for tp in c1.assignment()} & {tp.partition for tp in c2.assignment()}
    # commit offset 50 on every partition, then leave
    commits = [ck.TopicPartition("grp-t", part, 50) for part in range(4)]
    for c in (c1, c2):
        mine = {tp.partition for tp in c.assignment()}
        c.commit(offsets=[tp for tp in commits if tp.partition in mine], asynchronous=False)
        c.close()

    broker.restart()

    c3 = _consumer(broker, "g")
    try:
        committed = c3.committed([ck.TopicPartition("grp-t", part) for part in range(4)], 30)
        assert [tp.offset for tp in committed] == [50, 50, 50, 50]
        c3.subscribe(["grp-t"])
        got: list[ck.Message] = []
        deadline = time.monotonic() + 60
        while len(got) < 200 and time.monotonic() < deadline:
            m = c3.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        assert len(got) == 200
        offsets = [m.offset() for m in got]
        assert None not in offsets
        assert min(o for o in offsets if o is not None) == 50
    finally:
        c3.close()
