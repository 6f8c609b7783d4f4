"""IncrementalAlterConfigs' list operations, shared by topic and broker configs."""

from __future__ import annotations

APPEND = 2
SUBTRACT = 3


def list_op(current: str | None, value: str | None, op: int) -> str:
    """Kafka's APPEND (2) or SUBTRACT (3) of the comma-separated ``value`` on the list
    ``current``: an append adds the items not there yet, in order; a subtract removes every
    occurrence of the items given; blanks around items are ignored."""
    items = [x for x in (current or "").split(",") if x]
    given = [x.strip() for x in (value or "").split(",") if x.strip()]
    if op == APPEND:
        items += [x for x in given if x not in items]
    else:
        items = [x for x in items if x not in given]
    return ",".join(items)
