"""Spark jobs over the remote tier: `tierlog audit` and `tierlog usage`.

Both import pyspark only when they run, so `tierlog --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["audit_main", "usage_main"]


def audit_main(argv: Sequence[str] | None = None) -> int:
    from tierlog.spark.jobs.audit import audit_main as main

    return main(argv)


def usage_main(argv: Sequence[str] | None = None) -> int:
    from tierlog.spark.jobs.usage import usage_main as main

    return main(argv)
