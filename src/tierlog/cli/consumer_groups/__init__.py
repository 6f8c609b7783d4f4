"""``tierlog consumer-groups``: Kafka 3.7's ``kafka-consumer-groups.sh`` over the wire
(ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups,
OffsetDelete, FindCoordinator).

Modules: ``options`` (the flags and Kafka's checks of them), ``admin`` (the requests, each on
the broker that must answer it), ``describe`` (``--list`` / ``--describe``), ``reset``
(``--reset-offsets``), ``delete`` (``--delete`` / ``--delete-offsets``). Every failure is
reported as ``Error: ...`` on stderr with exit status 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from tierlog.cli.common import UsageError
from tierlog.cli.consumer_groups import delete, describe, options, reset
from tierlog.cli.consumer_groups.admin import GroupAdmin, GroupCommandError
from tierlog.client import WireConnection


def run(c: WireConnection, a: argparse.Namespace) -> None:
    """One action (checked by ``options.check_args`` before connecting)."""
    admin = GroupAdmin(c, timeout_s=a.timeout / 1000)
    try:
        ok = _act(admin, a)
    except UsageError as e:
        raise SystemExit(f"tierlog: {e}") from None
    except GroupCommandError as e:
        raise SystemExit(f"Error: {e}") from None
    except OSError as e:
        raise SystemExit(f"Error: a broker could not be reached: {e}") from None
    finally:
        admin.close()
    if not ok:
        raise SystemExit(1)


def _act(admin: GroupAdmin, a: argparse.Namespace) -> bool:
    if a.list:
        describe.list_groups(admin, a.state)
        return True
    groups = [g for g, _ in admin.list_groups()] if a.all_groups else list(dict.fromkeys(a.group))
    if a.describe:
        return describe.describe_groups(
            admin, groups, members=a.members, verbose=a.verbose, state=a.state is not None
        )
    if a.reset_offsets:
        return reset.reset_offsets(admin, a, groups)
    if a.delete:
        return delete.delete_groups(admin, groups)
    return delete.delete_offsets(admin, a.group[0], a.topic)


def register(sub: Any) -> None:
    """The ``consumer-groups`` command."""
    options.register(sub, run)
