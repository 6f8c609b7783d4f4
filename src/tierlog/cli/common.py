"""What every wire command of the CLI shares: the client id it announces, Kafka error codes
turned into exits, ``key=value`` options, and the retry on the controller a cluster names."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

#: The client id (and ApiVersions software name) the admin commands announce.
CLIENT_ID = "tierlog-cli"

T = TypeVar("T")


class UsageError(Exception):
    """Options Kafka's tool refuses: the message, exit 1, before any connection."""


@contextmanager
def usage_errors(*also: type[Exception]) -> Iterator[None]:
    """A refused option (a ``UsageError``, or one of ``also``) ends the command as Kafka's
    tools end it: the message, and exit status 1."""
    refused: tuple[type[Exception], ...] = (UsageError, *also)
    try:
        yield
    except refused as e:
        raise SystemExit(f"tierlog: {e}") from None


def check(code: int, message: str | None, what: str) -> None:
    """Exit with Kafka's error name when ``code`` is not NONE."""
    if int(code) != 0:
        name = ErrorCode(int(code)).name
        raise SystemExit(f"{what}: {name}" + (f": {message}" if message else ""))


def kv(items: Sequence[str] | None) -> dict[str, str]:
    """Repeated ``KEY=VALUE`` options as a dict."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def on_controller(
    c: WireConnection, call: Callable[[WireConnection], T], error: Callable[[T], int]
) -> T:
    """``call`` on ``c``; answered NOT_CONTROLLER, again on the controller its Metadata names
    (a cluster serves topic creation, deletion, elections and reassignments there, as
    Kafka's admin client sends them)."""
    answer = call(c)
    if error(answer) != ErrorCode.NOT_CONTROLLER:
        return answer
    md = c.call(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False)
    where = {int(b.node_id): (b.host, int(b.port)) for b in md.brokers}
    controller = where.get(int(md.controller_id))
    if controller is None:
        return answer
    with WireConnection(*controller, client_id=CLIENT_ID) as conn:
        return call(conn)


def supports(c: WireConnection, api_key: ApiKey, version: int) -> bool:
    """ApiVersions says the broker serves ``version`` of ``api_key``."""
    r = c.call(ApiKey.API_VERSIONS, 3, client_software_name=CLIENT_ID, client_software_version="0")
    return any(
        int(k.api_key) == api_key and int(k.min_version) <= version <= int(k.max_version)
        for k in r.api_keys
    )


def read_json(path: Path) -> Any:
    """A JSON file the operator names; unreadable or malformed is an exit, not a trace."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"tierlog: cannot read {path}: {e}") from None


def by_topic(keys: Sequence[tuple[str, int]]) -> dict[str, list[int]]:
    """(topic, partition) pairs grouped by topic, in first-seen order (request layout)."""
    out: dict[str, list[int]] = {}
    for topic, p in keys:
        out.setdefault(topic, []).append(p)
    return out


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each cell left-aligned to its column's widest
    value and followed by a tab, the header first (``kafka-transactions.sh``'s layout, which
    scripts split on whitespace)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for row in [headers, *rows]:
        print("".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True)))
