"""``--list`` and ``--describe`` (offsets, ``--members``, ``--state``) in the columns of
Kafka's tool. Lag is the log end offset (read_uncommitted ListOffsets) minus the committed
offset, ``-`` where either is unknown."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tierlog.cli.consumer_groups.admin import GroupAdmin, GroupDescription
from tierlog.cli.consumer_groups.options import STATES
from tierlog.cli.leaders import TopicPartition

MISSING = "-"

#: Group states that mean a rebalance is under way (Kafka warns and still prints).
REBALANCING = {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}


@dataclass(frozen=True, slots=True)
class OffsetRow:
    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    log_end_offset: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def list_groups(admin: GroupAdmin, states: str | None) -> None:
    """Group ids, or with ``--state`` a GROUP / STATE table (filtered when states are
    named, matched case-insensitively as Kafka parses them)."""
    if states is None:
        for group, _ in admin.list_groups():
            print(group)
        return
    canonical = {s.lower(): s for s in STATES}
    wanted = [canonical[s.strip().lower()] for s in states.split(",") if s.strip()]
    groups = admin.list_groups(wanted)
    width = max([15, *(len(g) for g, _ in groups)]) + 10
    print(f"{'GROUP':<{width}} {'STATE':<20}".rstrip())
    for group, state in groups:
        print(f"{group:<{width}} {state:<20}".rstrip())


def should_print(description: GroupDescription, rows: int) -> bool:
    """Kafka's notices before a group's table: a missing group is an error, an empty one
    or one rebalancing a note on stderr; False when there is nothing to show."""
    group, state = description.group_id, description.state
    if state == "Dead":
        print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
        return False
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in REBALANCING:
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return rows > 0


def offset_rows(admin: GroupAdmin, d: GroupDescription) -> list[OffsetRow]:
    """Assigned partitions first, by member (most partitions first) then partition; then
    the committed partitions no member holds, with ``-`` for the member columns."""
    committed = admin.committed(d.group_id)
    members = sorted(
        (m for m in d.members if m.assignment), key=lambda m: len(m.assignment), reverse=True
    )
    assigned: list[tuple[TopicPartition, str, str, str]] = []
    for m in members:
        for tp in sorted(m.assignment, key=lambda tp: (tp[1], tp[0])):
            assigned.append((tp, m.member_id, m.host, m.client_id))
    held = {tp for tp, *_ in assigned}
    unassigned = [
        (tp, MISSING, MISSING, MISSING)
        for tp in sorted(committed, key=lambda tp: (tp[0], tp[1]))
        if tp not in held
    ]
    everything = assigned + unassigned
    ends = admin.list_offsets([tp for tp, *_ in everything], -1)
    return [
        OffsetRow(d.group_id, tp[0], tp[1], committed.get(tp), ends.get(tp), cid, host, client)
        for tp, cid, host, client in everything
    ]


def print_offsets(rows: list[OffsetRow]) -> None:
    group_w = max([15, *(len(r.group) for r in rows)])
    topic_w = max([15, *(len(_cell(r.topic)) for r in rows)])
    cid_w = max([15, *(len(r.consumer_id) for r in rows)])
    host_w = max([15, *(len(r.host) for r in rows)])

    def line(*cells: object) -> str:
        g, t, p, o, e, lag, cid, host, client = (str(c) for c in cells)
        return (
            f"{g:<{group_w}} {t:<{topic_w}} {p:<10} {o:<15} {e:<15} {lag:<15} "
            f"{cid:<{cid_w}} {host:<{host_w}} {client}"
        )

    print()
    print(
        line(
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        )
    )
    for r in rows:
        print(
            line(
                r.group,
                _cell(r.topic),
                _cell(r.partition),
                _cell(r.offset),
                _cell(r.log_end_offset),
                _cell(r.lag),
                r.consumer_id,
                r.host,
                r.client_id,
            )
        )


def print_members(d: GroupDescription, verbose: bool) -> None:
    with_instance = any(m.group_instance_id for m in d.members)
    widths = {
        "group": max([15, len(d.group_id)]),
        "cid": max([15, *(len(m.member_id) for m in d.members)]),
        "gid": max([17, *(len(m.group_instance_id or "") for m in d.members)]),
        "host": max([15, *(len(m.host) for m in d.members)]),
        "client": max([15, *(len(m.client_id) for m in d.members)]),
    }

    def line(group: str, cid: str, gid: str, host: str, client: str, n: str, tail: str) -> str:
        cells = [f"{group:<{widths['group']}}", f"{cid:<{widths['cid']}}"]
        if with_instance:
            cells.append(f"{gid:<{widths['gid']}}")
        cells += [f"{host:<{widths['host']}}", f"{client:<{widths['client']}}", f"{n:<15}"]
        return (" ".join(cells) + " " + tail).rstrip()

    print()
    print(
        line(
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT" if verbose else "",
        )
    )
    for m in d.members:
        tail = ""
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for topic, p in m.assignment:
                by_topic.setdefault(topic, []).append(p)
            tail = (
                ", ".join(
                    sorted(
                        f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in by_topic.items()
                    )
                )
                or MISSING
            )
        print(
            line(
                d.group_id,
                m.member_id,
                m.group_instance_id or "",
                m.host,
                m.client_id,
                str(len(m.assignment)),
                tail,
            )
        )


def print_state(d: GroupDescription) -> None:
    coordinator = str(d.coordinator)
    width = max(25, len(coordinator))

    def line(*cells: object) -> str:
        g, c, s, st, n = (str(x) for x in cells)
        return f"{g:<{width}} {c:<25} {s:<20} {st:<15} {n}"

    print()
    print(line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
    print(line(d.group_id, coordinator, d.assignment_strategy, d.state, len(d.members)))


def describe_groups(
    admin: GroupAdmin, groups: list[str], *, members: bool, verbose: bool, state: bool
) -> bool:
    """Describe each group (sorted, as Kafka's tree map); False when one does not exist."""
    ok = True
    for group in sorted(set(groups)):
        d = admin.describe(group)
        if d.state == "Dead":
            should_print(d, 0)
            ok = False
            continue
        if state:
            if should_print(d, 1):
                print_state(d)
        elif members:
            if should_print(d, len(d.members)):
                print_members(d, verbose)
        else:
            rows = offset_rows(admin, d)
            if should_print(d, len(rows)):
                print_offsets(rows)
    return ok
