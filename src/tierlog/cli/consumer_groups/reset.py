"""``--reset-offsets``: the plan Kafka's tool computes for each scenario, printed (dry run,
the default) or committed (``--execute``), only for a group with no active members."""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from tierlog.cli.common import UsageError
from tierlog.cli.consumer_groups.admin import GroupAdmin, GroupCommandError
from tierlog.cli.consumer_groups.options import parse_topic_arg
from tierlog.cli.leaders import TopicPartition

#: States in which a group has no member that would overwrite the reset on its next commit.
INACTIVE = {"Empty", "Dead"}

_DURATION = re.compile(
    r"^([-+]?)P(?:([-+]?\d+)D)?"
    r"(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?$",
    re.IGNORECASE,
)


def parse_duration(text: str) -> timedelta:
    """ISO-8601 ``PnDTnHnMnS`` as Java's ``Duration.parse`` reads it."""
    m = _DURATION.match(text.strip())
    if m is None or text.strip().upper().endswith("T") or text.strip().upper() in {"P", "-P"}:
        raise UsageError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    d = timedelta(
        days=int(days or 0),
        hours=int(hours or 0),
        minutes=int(minutes or 0),
        seconds=int(seconds or 0),
        microseconds=int((fraction or "0").ljust(9, "0")[:6])
        * (-1 if (seconds or "").startswith("-") else 1),
    )
    return -d if sign == "-" else d


def parse_datetime(text: str) -> int:
    """Kafka's ``Utils.getDateTime``: ``yyyy-MM-ddTHH:mm:ss.SSS`` followed by a zone (``Z``,
    ``±hh``, ``±hhmm``, ``±hh:mm``) or by none, which means UTC. Epoch milliseconds."""
    m = re.fullmatch(
        r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?)"
        r"(Z|[+-]\d{2}(?::?\d{2})?)?",
        text.strip(),
    )
    if m is None:
        raise UsageError(
            f"Error parsing timestamp '{text}': expected yyyy-MM-ddTHH:mm:ss.SSS[zone]"
        )
    local, zone = m.group(1), m.group(2) or "Z"
    if zone == "Z":
        offset = "+00:00"
    else:
        digits = zone[1:].replace(":", "")
        offset = f"{zone[0]}{digits[:2]}:{digits[2:] or '00'}"
    try:
        parsed = datetime.fromisoformat(local + offset)
    except ValueError as e:
        raise UsageError(f"Error parsing timestamp '{text}': {e}") from None
    return int(parsed.timestamp() * 1000)


def read_plan(path: Path, groups: list[str]) -> dict[str, dict[TopicPartition, int]]:
    """Kafka's reset CSV: ``topic,partition,offset`` for a single ``--group``, else
    ``group,topic,partition,offset`` (what ``--export`` wrote)."""
    try:
        rows = [r for r in csv.reader(path.read_text(encoding="utf-8").splitlines()) if r]
    except OSError as e:
        raise GroupCommandError(f"cannot read {path}: {e}") from None
    plan: dict[str, dict[TopicPartition, int]] = {}
    try:
        for row in rows:
            if len(row) == 3 and len(groups) == 1:
                group, (topic, p, o) = groups[0], row
            elif len(row) == 4:
                group, topic, p, o = row
            else:
                raise ValueError(row)
            plan.setdefault(group, {})[(topic, int(p))] = int(o)
    except ValueError as e:
        raise GroupCommandError(f"{path} is not a reset plan: {e}") from None
    return plan


def _scope(admin: GroupAdmin, a: argparse.Namespace, group: str) -> list[TopicPartition]:
    if a.all_topics:
        return sorted(admin.committed(group))
    out: list[TopicPartition] = []
    whole: list[str] = []
    for arg in a.topic or []:
        topic, partitions = parse_topic_arg(arg)
        if partitions is None:
            whole.append(topic)
        else:
            out += [(topic, p) for p in partitions]
    for topic, partitions in admin.partitions_of(whole).items():
        if partitions is None:
            raise GroupCommandError(f"Topic '{topic}' does not exist")
        out += [(topic, p) for p in partitions]
    return sorted(set(out))


def _clamped(admin: GroupAdmin, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Kafka's range check: an offset past the log end is set to it, one before the log
    start to that, each with a warning."""
    starts = admin.list_offsets(wanted, -2)
    ends = admin.list_offsets(wanted, -1)
    out = {}
    for tp, asked in wanted.items():
        offset = asked
        end, start = ends.get(tp), starts.get(tp)
        name = f"{tp[0]}-{tp[1]}"
        if end is not None and offset > end:
            print(
                f"WARN: New offset ({offset}) is higher than latest offset for topic partition "
                f"{name}. Value will be set to {end}",
                file=sys.stderr,
            )
            offset = end
        elif start is not None and offset < start:
            print(
                f"WARN: New offset ({offset}) is lower than earliest offset for topic partition "
                f"{name}. Value will be set to {start}",
                file=sys.stderr,
            )
            offset = start
        out[tp] = offset
    return out


def _known(offsets: dict[TopicPartition, int | None], what: str) -> dict[TopicPartition, int]:
    for tp, offset in offsets.items():
        if offset is None:
            raise UsageError(f"Error getting {what} offset of topic partition: {tp[0]}-{tp[1]}")
    return {tp: o for tp, o in offsets.items() if o is not None}


def _by_time(admin: GroupAdmin, parts: list[TopicPartition], ts: int) -> dict[TopicPartition, int]:
    found = admin.list_offsets(parts, ts)
    empty = [tp for tp, o in found.items() if o is None or o < 0]
    for topic, p in empty:
        print(
            f"\nWarn: Partition {p} from topic {topic} is empty. "
            "Falling back to latest known offset."
        )
    found.update(admin.list_offsets(empty, -1))
    return _known(found, "offset by timestamp")


def plan_for(
    admin: GroupAdmin,
    a: argparse.Namespace,
    group: str,
    from_file: dict[str, dict[TopicPartition, int]] | None,
) -> dict[TopicPartition, int]:
    """The new offset of each partition in scope for ``group``."""
    if from_file is not None:
        wanted = from_file.get(group)
        if wanted is None:
            print(f"Error: No reset plan for group {group} found", file=sys.stderr)
            return {}
        return _clamped(admin, wanted)
    parts = _scope(admin, a, group)
    if a.to_offset is not None:
        return _clamped(admin, dict.fromkeys(parts, a.to_offset))
    if a.to_earliest:
        return _known(admin.list_offsets(parts, -2), "starting")
    if a.to_latest:
        return _known(admin.list_offsets(parts, -1), "ending")
    if a.shift_by is not None:
        committed = admin.committed(group)
        wanted = {}
        for tp in parts:
            if tp not in committed:
                raise UsageError(
                    f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no "
                    "current committed offset"
                )
            wanted[tp] = committed[tp] + a.shift_by
        return _clamped(admin, wanted)
    if a.to_datetime is not None:
        return _by_time(admin, parts, parse_datetime(a.to_datetime))
    if a.by_duration is not None:
        since = int(time.time() * 1000) - int(
            parse_duration(a.by_duration) / timedelta(milliseconds=1)
        )
        return _by_time(admin, parts, since)
    committed = admin.committed(group)
    plan = {tp: committed[tp] for tp in parts if tp in committed}
    missing = [tp for tp in parts if tp not in committed]
    plan.update(_known(admin.list_offsets(missing, -1), "ending"))
    return plan


def reset_offsets(admin: GroupAdmin, a: argparse.Namespace, groups: list[str]) -> bool:
    """Plan (and with ``--execute`` commit) each group's reset; False when a group was
    refused because it has active members."""
    from_file = read_plan(a.from_file, a.group or []) if a.from_file is not None else None
    ok = True
    plans: dict[str, dict[TopicPartition, int]] = {}
    for group in sorted(set(groups)):
        state = admin.describe(group).state
        if state not in INACTIVE:
            print(
                f"\nError: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {state}.",
                file=sys.stderr,
            )
            ok = False
            continue
        plan = plan_for(admin, a, group, from_file)
        if a.execute and plan:
            admin.commit(group, plan)
        plans[group] = plan
    if a.export:
        single = len(a.group or []) == 1
        for group, plan in plans.items():
            for (topic, p), offset in sorted(plan.items()):
                print(f"{topic},{p},{offset}" if single else f"{group},{topic},{p},{offset}")
        return ok
    if any(plans.values()):
        print()
        print(f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}".rstrip())
    for group, plan in plans.items():
        for (topic, p), offset in sorted(plan.items()):
            print(f"{group:<30} {topic:<30} {p:<10} {offset:<15}".rstrip())
    return ok
