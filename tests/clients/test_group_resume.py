"""Two group members per client share a topic, commit, the broker restarts, and a new pair
of members resumes exactly at the committed offsets.

Ordering makes the check sharp: old records precede new ones in each partition, so a
member resuming from an offset that is too early would deliver an old (committed) record
before the new ones, and one resuming too late would miss a new record. Members are
started and given their partitions before anything is produced, so each phase is also
expected to deliver every record to exactly one member.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.clients.real_clients import (
    ConfluentDriver,
    Driver,
    GroupMember,
    committed_offsets,
    create_topic,
    values,
)
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until

PARTITIONS = 2
PER_PARTITION = 60


def _run_phase(
    b: BrokerProcess, driver: Driver, topic: str, group: str, tag: str
) -> tuple[list[bytes], list[GroupMember]]:
    """Start two members, wait for a split assignment, produce, consume all, commit, close."""
    members = [driver.member(b.bootstrap, topic, group) for _ in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(
            lambda: (
                sorted(p for m in members for p in m.assigned()) == list(range(PARTITIONS))
                and all(m.assigned() for m in members)
            ),
            45,
            what="both members to own one partition each",
        )
        sent = {p: values(f"{tag}-p{p}", PER_PARTITION) for p in range(PARTITIONS)}
        driver.produce(b.bootstrap, topic, [(p, v) for p in sent for v in sent[p]])
        everything = [v for p in sent for v in sent[p]]
        seen = _collect(members, len(everything))
        assert sorted(v for _, _, v in seen) == sorted(everything)
        for m in members:
            m.commit()
    finally:
        for m in members:
            m.close()
    return everything, members


def _collect(members: list[GroupMember], count: int) -> list[tuple[int, int, bytes]]:
    def all_seen() -> list[tuple[int, int, bytes]] | None:
        seen = [s for m in members for s in m.seen()]
        return seen if len(seen) >= count else None

    return wait_until(all_seen, 45, what=f"{count} records across the group") or []


def test_group_commits_and_resumes_after_restart(
    broker_factory: Callable[..., BrokerProcess], driver: Driver
) -> None:
    b = broker_factory(dict(driver.group_broker_overrides))
    topic, group = f"grp-{driver.name}", f"g-{driver.name}"
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)

    first, members = _run_phase(b, driver, topic, group, "before")
    # each member owned one partition and saw only that partition's records
    assert sorted(len({p for p, _, _ in m.seen()}) for m in members) == [1, 1]
    wait_until(
        lambda: (
            committed_offsets(b.bootstrap, group, topic, PARTITIONS) == [PER_PARTITION] * PARTITIONS
        ),
        30,
        what="commits to reach the end of both partitions",
    )

    b.restart()
    assert committed_offsets(b.bootstrap, group, topic, PARTITIONS) == [PER_PARTITION] * 2

    second, members = _run_phase(b, driver, topic, group, "after")
    seen = [s for m in members for s in m.seen()]
    assert not {v for _, _, v in seen} & set(first), "a committed record was re-delivered"
    assert sorted(v for _, _, v in seen) == sorted(second)
    assert sorted(o for _, o, _ in seen) == sorted(
        list(range(PER_PARTITION, 2 * PER_PARTITION)) * PARTITIONS
    )
    wait_until(
        lambda: (
            committed_offsets(b.bootstrap, group, topic, PARTITIONS)
            == [2 * PER_PARTITION] * PARTITIONS
        ),
        30,
        what="second commits",
    )


def test_committed_offsets_survive_kill_9(broker_factory: Callable[..., BrokerProcess]) -> None:
    """A commit is acknowledged only once it is in ``__consumer_offsets``: a crash right
    after it (no flush, no clean shutdown) must not lose it."""
    # one-partition internal topics: the post-kill recovery then has 2 logs, not ~100
    b = broker_factory(
        {
            "offsets.topic.num.partitions": "1",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        }
    )
    driver = ConfluentDriver()
    topic, group = "grp-kill", "g-kill"
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    first, _ = _run_phase(b, driver, topic, group, "before")

    b.kill()
    b.start()
    assert committed_offsets(b.bootstrap, group, topic, PARTITIONS) == [PER_PARTITION] * 2
    second, members = _run_phase(b, driver, topic, group, "after")
    seen = {v for m in members for _, _, v in m.seen()}
    assert seen == set(second)
    assert not seen & set(first)
