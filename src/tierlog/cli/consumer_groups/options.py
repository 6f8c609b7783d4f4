"""The options of ``tierlog consumer-groups`` and their checks, as Kafka 3.7's
``ConsumerGroupCommandOptions`` makes them: exactly one action, the options each action
takes, one reset scenario. Messages name options as Kafka's parser prints them
(``[describe]``), so a script written against Kafka's tool reads the same refusals."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tierlog.cli.common import UsageError, usage_errors

ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")

#: The reset scenarios, each excluding the others (Kafka's ``allResetOffsetScenarioOpts``).
SCENARIOS = (
    "to_offset",
    "to_earliest",
    "to_latest",
    "to_current",
    "shift_by",
    "to_datetime",
    "by_duration",
    "from_file",
)


#: The group states ``--state`` may name (Kafka's ``ConsumerGroupState``, case-insensitive).
STATES = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
)


def _name(dest: str) -> str:
    return "[" + dest.replace("_", "-") + "]"


def given(a: argparse.Namespace, dest: str) -> bool:
    value = getattr(a, dest)
    return value is not None and value is not False and value != []


def _exclusive(a: argparse.Namespace, used: str, others: tuple[str, ...]) -> None:
    if not given(a, used):
        return
    for other in others:
        if other != used and given(a, other):
            raise UsageError(f'Option "{_name(used)}" can\'t be used with option "{_name(other)}"')


def check_args(a: argparse.Namespace) -> None:
    """Kafka's checks, in its order; exits 1 with the message on the first that fails."""
    with usage_errors():
        _check(a)


def _check(a: argparse.Namespace) -> None:
    if sum(given(a, x) for x in ACTIONS) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --delete, "
            "--reset-offsets, --delete-offsets"
        )
    for only_describe in ("members", "verbose", "offsets"):
        if given(a, only_describe) and not a.describe:
            raise UsageError(
                f"Option(s) {_name(only_describe)} are unavailable given other options on "
                "the command line"
            )
    if a.state is not None and not (a.describe or a.list):
        raise UsageError(
            "Option(s) [state] are unavailable given other options on the command line"
        )
    if a.list and a.state:
        named = [s.strip().lower() for s in a.state.split(",")]
        if not set(named) <= {s.lower() for s in STATES}:
            raise UsageError(
                f"Invalid state list '{a.state}'. Valid states are: {', '.join(STATES)}"
            )
    _check_describe(a)
    _check_delete(a)
    _check_reset(a)
    _exclusive(a, "group", ("all_groups",))
    _exclusive(a, "group", ("list",))
    _exclusive(a, "topic", ("list", "describe"))


_SCOPE = "[all-groups], [group]"


def _check_describe(a: argparse.Namespace) -> None:
    scope = _SCOPE
    if a.describe:
        if not (a.group or a.all_groups):
            raise UsageError(f"Option [describe] takes one of these options: {scope}")
        if sum(given(a, x) for x in ("members", "offsets", "state")) > 1:
            raise UsageError(
                "Option [describe] takes at most one of these options: "
                "[members], [offsets], [state]"
            )
        if a.state:
            raise UsageError("Option [describe] does not take a value for [state]")


def _check_delete(a: argparse.Namespace) -> None:
    scope = _SCOPE
    if a.delete:
        if not (a.group or a.all_groups):
            raise UsageError(f"Option [delete] takes one of these options: {scope}")
        if a.topic:
            raise UsageError(
                "The consumer does not support topic-specific offset deletion from a "
                "consumer group."
            )
    if a.delete_offsets and not (a.group and a.topic):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")


def _check_reset(a: argparse.Namespace) -> None:
    scope = _SCOPE
    if a.reset_offsets:
        if a.dry_run and a.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not a.dry_run and not a.execute:
            print(
                "WARN: No action will be performed as the --execute option is missing. "
                "Add --dry-run explicitly when scripting this command to keep this behaviour.",
                file=sys.stderr,
            )
        if not (a.group or a.all_groups):
            raise UsageError(f"Option [reset-offsets] takes one of these options: {scope}")
        for scenario in SCENARIOS:
            _exclusive(a, scenario, SCENARIOS)
        if not any(given(a, s) for s in SCENARIOS):
            raise UsageError(
                "Option '[reset-offsets]' requires one of the following scenarios: "
                + ", ".join(_name(s) for s in SCENARIOS)
            )
        if not (a.topic or a.all_topics or a.from_file):
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    else:
        for reset_only in ("dry_run", "execute", "export", "all_topics", *SCENARIOS):
            if given(a, reset_only):
                raise UsageError(
                    f"Option(s) {_name(reset_only)} are unavailable given other options on "
                    "the command line"
                )


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (Kafka's ``--topic`` of reset and delete-offsets)."""
    if ":" not in arg:
        return arg, None
    topic, _, partitions = arg.partition(":")
    if not topic or not partitions or ":" in partitions:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    out = []
    for p in partitions.split(","):
        try:
            out.append(int(p))
        except ValueError:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
    return topic, out


def register(sub: Any, run: Any) -> None:
    """The ``consumer-groups`` parser: Kafka's flags, checked by ``check_args``."""
    p = sub.add_parser(
        "consumer-groups",
        help="list, describe, reset and delete consumer groups (kafka-consumer-groups.sh)",
        description="List all consumer groups, describe a consumer group, delete consumer "
        "group info, or reset consumer group offsets.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    act = p.add_argument_group("actions (exactly one)")
    act.add_argument("--list", action="store_true", help="list all consumer groups")
    act.add_argument("--describe", action="store_true", help="describe consumer group(s)")
    act.add_argument("--delete", action="store_true", help="delete consumer group(s)")
    act.add_argument(
        "--reset-offsets", action="store_true", help="reset the offsets of consumer group(s)"
    )
    act.add_argument(
        "--delete-offsets", action="store_true", help="delete a group's offsets of --topic"
    )
    p.add_argument("--group", action="append", help="the consumer group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every consumer group")
    p.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,...]",
        help="reset or delete-offsets scope (repeatable); partitions after a colon",
    )
    p.add_argument("--all-topics", action="store_true", help="reset scope: every topic")
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="--describe: the groups' state; --list: show states, or only those listed "
        "(comma-separated, e.g. Stable,Empty)",
    )
    p.add_argument("--members", action="store_true", help="--describe: the members")
    p.add_argument("--verbose", action="store_true", help="--members: their assignments")
    p.add_argument("--offsets", action="store_true", help="--describe: offsets and lag")
    p.add_argument(
        "--timeout",
        type=int,
        default=5000,
        metavar="MS",
        help="how long to wait for a coordinator that is loading (default 5000)",
    )
    reset = p.add_argument_group("--reset-offsets")
    reset.add_argument("--dry-run", action="store_true", help="print the plan (default)")
    reset.add_argument("--execute", action="store_true", help="commit the plan")
    reset.add_argument("--export", action="store_true", help="print the plan as CSV")
    reset.add_argument("--to-offset", type=int, metavar="OFFSET")
    reset.add_argument("--to-earliest", action="store_true")
    reset.add_argument("--to-latest", action="store_true")
    reset.add_argument("--to-current", action="store_true")
    reset.add_argument("--shift-by", type=int, metavar="N")
    reset.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="UTC unless a zone (Z, +hh:mm) is given",
    )
    reset.add_argument("--by-duration", metavar="PnDTnHnMnS", help="back from now")
    reset.add_argument(
        "--from-file", type=Path, metavar="CSV", help="topic,partition,offset (or group first)"
    )
    p.set_defaults(func=None, wire_fn=run, check_args=check_args)
