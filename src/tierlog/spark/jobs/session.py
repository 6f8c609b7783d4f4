"""The SparkSession a job runs in: the caller's if one is active, else a local[2] one.

Jobs run inside an application that already has a session (a notebook, a test, another
job) as well as from the `tierlog` command line, where they build their own; either way
the `tierlog` format is registered.
"""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_MASTER = "local[2]"


def job_session(app_name: str, master: str | None = None) -> tuple[Any, bool]:
    """(session, created): stop the session afterwards only if `created`."""
    from pyspark.sql import SparkSession

    import tierlog.spark

    active = SparkSession.getActiveSession()
    if active is not None:
        tierlog.spark.register(active)
        return active, False
    master = master or DEFAULT_MASTER
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
    )
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.ui.enabled", "false"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    tierlog.spark.register(session)
    return session, True
