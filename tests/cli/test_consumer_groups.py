"""``tierlog consumer-groups`` (Kafka's ``kafka-consumer-groups.sh``) as an operator runs
it, against a real broker whose groups real consumers (librdkafka) joined and committed.

One broker serves the module; each test has its own topic and groups. ``history`` holds
``COUNT`` records in each of its two partitions, record ``i`` stamped ``COUNT - i`` days ago,
so each reset scenario has one right answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.groups_helpers import (
    DAY_MS,
    active_member,
    commit,
    committed,
    create_topic,
    first_offsets_read,
    groups_cli,
    produce_days,
    table,
)
from tests.helpers.broker import BrokerProcess
from tests.helpers.wire import closed_port
from tierlog.cli import main

COUNT = 10
HISTORY = "history"


@pytest.fixture(scope="module")
def history(module_broker: BrokerProcess) -> Iterator[tuple[str, int]]:
    """The module broker's bootstrap with ``history`` written, and the time it was
    written against (ms)."""
    now_ms = int(time.time() * 1000)
    create_topic(module_broker.bootstrap, HISTORY, 2)
    produce_days(module_broker.bootstrap, HISTORY, 2, COUNT, now_ms)
    yield module_broker.bootstrap, now_ms


@pytest.fixture
def bootstrap(history: tuple[str, int]) -> str:
    return history[0]


def test_list_shows_groups_and_filters_by_state(bootstrap: str) -> None:
    commit(bootstrap, "list-idle", {(HISTORY, 0): 1})
    with active_member(bootstrap, "list-busy", [HISTORY]):
        listed = groups_cli(bootstrap, "--list")
        states = groups_cli(bootstrap, "--list", "--state")
        stable = groups_cli(bootstrap, "--list", "--state", "stable")
    assert listed.returncode == 0, listed.stderr
    assert {"list-idle", "list-busy"} <= set(listed.stdout.split())
    rows = {r["GROUP"]: r["STATE"] for r in table(states.stdout)}
    assert rows["list-idle"] == "Empty" and rows["list-busy"] == "Stable"
    assert [r["GROUP"] for r in table(stable.stdout)] == ["list-busy"]


def test_describe_reports_lag_from_the_log_end_offset(bootstrap: str) -> None:
    commit(bootstrap, "lagging", {(HISTORY, 0): 4, (HISTORY, 1): COUNT})
    r = groups_cli(bootstrap, "--describe", "--group", "lagging")
    assert r.returncode == 0, r.stderr
    assert "Consumer group 'lagging' has no active members." in r.stderr
    rows = table(r.stdout)
    assert [(x["PARTITION"], x["CURRENT-OFFSET"], x["LOG-END-OFFSET"], x["LAG"]) for x in rows] == [
        ("0", "4", str(COUNT), str(COUNT - 4)),
        ("1", str(COUNT), str(COUNT), "0"),
    ]
    assert {(x["CONSUMER-ID"], x["HOST"], x["CLIENT-ID"]) for x in rows} == {("-", "-", "-")}


def test_describe_of_an_active_group_names_its_member_in_every_view(bootstrap: str) -> None:
    """The offsets view, ``--members --verbose`` and ``--state`` of a Stable group; a
    partition with no commit shows ``-`` for its offset and lag."""
    commit(bootstrap, "held", {(HISTORY, 0): 7})
    with active_member(bootstrap, "held", [HISTORY], client_id="reader-7"):
        offsets = groups_cli(bootstrap, "--describe", "--group", "held")
        members = groups_cli(bootstrap, "--describe", "--group", "held", "--members", "--verbose")
        state = groups_cli(bootstrap, "--describe", "--group", "held", "--state")
    rows = table(offsets.stdout)
    assert [(x["PARTITION"], x["CURRENT-OFFSET"], x["LAG"]) for x in rows] == [
        ("0", "7", str(COUNT - 7)),
        ("1", "-", "-"),
    ]
    assert {x["CLIENT-ID"] for x in rows} == {"reader-7"}
    assert all(x["CONSUMER-ID"].startswith("reader-7-") for x in rows)
    (member,) = table(members.stdout)
    assert member["#PARTITIONS"] == "2" and member["ASSIGNMENT"] == f"{HISTORY}(0,1)"
    (described,) = table(state.stdout)
    assert described["STATE"] == "Stable" and described["#MEMBERS"] == "1"
    assert described["ASSIGNMENT-STRATEGY"] == "range"


def test_describe_of_a_missing_group_fails(bootstrap: str) -> None:
    r = groups_cli(bootstrap, "--describe", "--group", "never-seen")
    assert r.returncode == 1
    assert "Error: Consumer group 'never-seen' does not exist." in r.stderr


def test_reset_dry_run_prints_the_plan_and_commits_nothing(bootstrap: str) -> None:
    commit(bootstrap, "dry", {(HISTORY, 0): 5, (HISTORY, 1): 6})
    for extra in ([], ["--dry-run"]):
        r = groups_cli(
            bootstrap,
            "--reset-offsets",
            "--group",
            "dry",
            "--topic",
            HISTORY,
            "--to-earliest",
            *extra,
        )
        assert r.returncode == 0, r.stderr
        assert [(x["PARTITION"], x["NEW-OFFSET"]) for x in table(r.stdout)] == [
            ("0", "0"),
            ("1", "0"),
        ]
    assert committed(bootstrap, "dry") == {(HISTORY, 0): 5, (HISTORY, 1): 6}


def _datetime_of_record(now_ms: int, i: int, zone_hours: int = 0) -> str:
    """Record ``i``'s timestamp as ``--to-datetime`` takes it: with no zone (UTC, as Kafka
    reads it) or in a zone ``zone_hours`` east of UTC."""
    ms = now_ms - (COUNT - i) * DAY_MS + zone_hours * 3_600_000
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}"
    return text + (f"+{zone_hours:02d}:00" if zone_hours else "")


#: Each scenario from a commit of 5 on both partitions: the options and the new offsets.
SCENARIOS: dict[str, Callable[[int], tuple[list[str], tuple[int, int]]]] = {
    "to-earliest": lambda now: (["--to-earliest"], (0, 0)),
    "to-latest": lambda now: (["--to-latest"], (COUNT, COUNT)),
    "to-offset": lambda now: (["--to-offset", "3"], (3, 3)),
    "to-offset-past-the-end": lambda now: (["--to-offset", "99"], (COUNT, COUNT)),
    "shift-by-back": lambda now: (["--shift-by", "-2"], (3, 3)),
    "shift-by-before-the-start": lambda now: (["--shift-by", "-50"], (0, 0)),
    "to-current": lambda now: (["--to-current"], (5, 5)),
    "to-datetime": lambda now: (["--to-datetime", _datetime_of_record(now, 3)], (3, 3)),
    "to-datetime-in-a-zone": lambda now: (
        ["--to-datetime", _datetime_of_record(now, 4, zone_hours=2)],
        (4, 4),
    ),
    "by-duration": lambda now: (["--by-duration", "P5DT12H"], (5, 5)),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_reset_execute_commits_each_scenario(history: tuple[str, int], scenario: str) -> None:
    bootstrap, now_ms = history
    group = f"reset-{scenario}"
    commit(bootstrap, group, {(HISTORY, 0): 5, (HISTORY, 1): 5})
    options, (p0, p1) = SCENARIOS[scenario](now_ms)
    r = groups_cli(
        bootstrap, "--reset-offsets", "--group", group, "--all-topics", *options, "--execute"
    )
    assert r.returncode == 0, r.stderr
    assert [(x["PARTITION"], x["NEW-OFFSET"]) for x in table(r.stdout)] == [
        ("0", str(p0)),
        ("1", str(p1)),
    ]
    assert committed(bootstrap, group) == {(HISTORY, 0): p0, (HISTORY, 1): p1}


def test_reset_from_file_of_an_export_commits_it(bootstrap: str, tmp_path: Path) -> None:
    """``--export`` writes the plan as CSV and ``--from-file`` commits it; ``--topic t:p``
    limits a reset to those partitions."""
    commit(bootstrap, "from-file", {(HISTORY, 0): 5, (HISTORY, 1): 5})
    exported = groups_cli(
        bootstrap,
        "--reset-offsets",
        "--group",
        "from-file",
        "--topic",
        f"{HISTORY}:1",
        "--to-offset",
        "2",
        "--export",
        "--dry-run",
    )
    assert exported.stdout.split() == [f"{HISTORY},1,2"]
    plan = tmp_path / "plan.csv"
    plan.write_text(exported.stdout)
    r = groups_cli(
        bootstrap, "--reset-offsets", "--group", "from-file", "--from-file", str(plan), "--execute"
    )
    assert r.returncode == 0, r.stderr
    assert committed(bootstrap, "from-file") == {(HISTORY, 0): 5, (HISTORY, 1): 2}


def test_consumer_restarted_after_a_reset_resumes_from_it(bootstrap: str) -> None:
    commit(bootstrap, "rewound", {(HISTORY, 0): COUNT, (HISTORY, 1): COUNT})
    r = groups_cli(
        bootstrap,
        "--reset-offsets",
        "--group",
        "rewound",
        "--topic",
        HISTORY,
        "--to-offset",
        "6",
        "--execute",
    )
    assert r.returncode == 0, r.stderr
    assert first_offsets_read(bootstrap, "rewound", HISTORY, 2) == {0: 6, 1: 6}


def test_reset_is_refused_while_the_group_has_active_members(bootstrap: str) -> None:
    commit(bootstrap, "busy", {(HISTORY, 0): 4})
    with active_member(bootstrap, "busy", [HISTORY]):
        r = groups_cli(
            bootstrap,
            "--reset-offsets",
            "--group",
            "busy",
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
    assert r.returncode == 1
    assert (
        "Error: Assignments can only be reset if the group 'busy' is inactive, but the current "
        "state is Stable." in r.stderr
    )
    assert committed(bootstrap, "busy") == {(HISTORY, 0): 4}


def test_delete_offsets_removes_only_that_topics_offsets(bootstrap: str) -> None:
    create_topic(bootstrap, "side", 1)
    commit(bootstrap, "pruned", {(HISTORY, 0): 3, (HISTORY, 1): 4, ("side", 0): 0})
    r = groups_cli(bootstrap, "--delete-offsets", "--group", "pruned", "--topic", HISTORY)
    assert r.returncode == 0, r.stderr
    assert f"Request succeed for deleting offsets with topic {HISTORY} group pruned" in r.stdout
    assert {
        (x["TOPIC"], x["PARTITION"], x["STATUS"]) for x in table(r.stdout.split("\n", 1)[1])
    } == {
        (HISTORY, "0", "Successful"),
        (HISTORY, "1", "Successful"),
    }
    assert committed(bootstrap, "pruned") == {("side", 0): 0}


def test_delete_removes_the_group_and_refuses_an_active_one(bootstrap: str) -> None:
    commit(bootstrap, "doomed", {(HISTORY, 0): 1})
    with active_member(bootstrap, "alive", [HISTORY]):
        refused = groups_cli(bootstrap, "--delete", "--group", "alive")
    assert refused.returncode == 1
    assert "* Group 'alive' could not be deleted due to: GroupNotEmptyException" in refused.stderr
    r = groups_cli(bootstrap, "--delete", "--group", "doomed")
    assert r.returncode == 0, r.stderr
    assert "Deletion of requested consumer groups ('doomed') was successful." in r.stdout
    assert "doomed" not in groups_cli(bootstrap, "--list").stdout.split()
    again = groups_cli(bootstrap, "--delete", "--group", "doomed")
    assert again.returncode == 1 and "GroupIdNotFoundException" in again.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Command must include exactly one action"),
        (["--list", "--describe"], "Command must include exactly one action"),
        (["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
        (["--describe", "--group", "g", "--members", "--state"], "takes at most one of these"),
        (
            ["--describe", "--group", "g", "--all-groups"],
            'Option "[group]" can\'t be used with option "[all-groups]"',
        ),
        (["--delete", "--group", "g", "--topic", "t"], "does not support topic-specific offset"),
        (
            ["--delete-offsets", "--group", "g"],
            "Option [delete-offsets] takes the following options",
        ),
        (
            ["--reset-offsets", "--group", "g", "--all-topics"],
            "requires one of the following scenarios",
        ),
        (
            ["--reset-offsets", "--group", "g", "--to-earliest"],
            "One of the reset scopes should be defined",
        ),
        (
            ["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"],
            'Option "[to-earliest]" can\'t be used with option "[to-latest]"',
        ),
        (
            [
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
                "--to-earliest",
                "--execute",
                "--dry-run",
            ],
            "only accepts one of [execute] and [dry-run]",
        ),
        (["--list", "--members"], "Option(s) [members] are unavailable"),
        (["--list", "--state", "Sleepy"], "Invalid state list 'Sleepy'. Valid states are:"),
    ],
)
def test_bad_option_combinations_are_refused_before_connecting(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's messages, exit 1, and no broker needed to say so (in-process: parsing only)."""
    address = f"127.0.0.1:{closed_port()}"
    with pytest.raises(SystemExit) as exited:
        main(["consumer-groups", "--bootstrap-server", address, *args])
    assert exited.value.code not in (0, None)
    assert message in str(exited.value.code) + capsys.readouterr().err


def test_unreachable_broker_is_reported() -> None:
    address = f"127.0.0.1:{closed_port()}"
    r = groups_cli(address, "--list")
    assert r.returncode == 1
    assert f"tierlog: cannot reach {address}" in r.stderr
