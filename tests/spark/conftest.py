"""One local[2] SparkSession for every Spark test: it costs ~7 s to start."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import tierlog.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tierlog-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    tierlog.spark.register(session)
    yield session
    session.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `tierlog serve` subprocess; yields its bootstrap address."""
    import subprocess
    import time
    from pathlib import Path

    root = tmp_path_factory.mktemp("broker")
    port, metrics = _free_port(), _free_port()
    exe = Path(sys.executable).with_name("tierlog")
    logfile = open(root / "broker.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [
            str(exe),
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={root / 'data'}",
            "--override",
            f"metrics.listener=http://127.0.0.1:{metrics}",
            "--override",
            f"rsm.config.dir={root / 'remote'}",
        ],
        cwd=root,
        stdout=logfile,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while b"tierlog ready" not in (root / "broker.log").read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError((root / "broker.log").read_text()[-3000:])
        time.sleep(0.05)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(30)
    logfile.close()
