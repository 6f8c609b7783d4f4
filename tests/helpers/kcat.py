"""kcat as a test consumer: librdkafka's own command-line client, installed by ``make install``."""

from __future__ import annotations

import subprocess


def consume_kcat(
    bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 60
) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of one partition, from the beginning to the end of the
    log as kcat sees it (``-e``)."""
    out = subprocess.run(
        [
            *("kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition)),
            *("-o", "beginning", "-e", "-q", "-f", "%o %s\\n"),
        ],
        capture_output=True,
        timeout=timeout_s,
        check=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        offset, value = line.split(b" ", 1)
        rows.append((int(offset), value))
    return rows
