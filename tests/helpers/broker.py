"""A real ``tierlog serve`` subprocess for integration tests.

Usage (fixtures in ``tests/conftest.py`` wrap this; import it directly for custom cases)::

    from tests.helpers.broker import BrokerProcess

    def test_something(broker):              # fresh broker, default test overrides
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

    def test_other(broker_factory):          # custom overrides, several brokers, restarts
        b = broker_factory(overrides={"log.segment.bytes": "1024"})
        b.stop()                             # SIGTERM, waits for exit, returns the exit code
        b.start()                            # same data dir, same port
        b.kill()                             # SIGKILL (crash), no clean-shutdown marker
        b.restart(kill=True)                 # kill -9 then start again

What it does:

* The broker runs as ``python -m tierlog serve --override ...`` in its own process group,
  with ``log.dirs`` in a temp dir (``b.log_dir``) and both the Kafka listener and the
  metrics endpoint on port 0 (the kernel picks free ports, so tests never collide). After
  the first start the Kafka port is pinned, so a restarted broker keeps its address and
  clients can reconnect.
* Readiness is detected by polling the broker's stdout for the ``tierlog ready:`` line it
  prints once the listener accepts connections (no sleeps); the line carries the bootstrap
  address, the metrics URL and the pid. If the process exits first, ``start`` raises with
  the tail of its log.
* Test defaults (``TEST_OVERRIDES``): ``auto.create.topics.enable=false`` (tests create
  their topics explicitly) and ``group.initial.rebalance.delay.ms=0`` (groups form without
  the 3 s delay). Pass ``overrides`` to change or add keys.
* ``TIERLOG_TEST_DEBUG=logger[,logger]`` in the test's environment logs those loggers of
  every broker at debug (``tierlog serve --debug``), to follow one mechanism in a failing run.
* ``b.stdout`` / ``b.stderr`` give the process output so far (stderr is the broker log);
  ``b.metrics_url`` is the Prometheus endpoint.
* ``close()`` (called by the fixtures) SIGKILLs a still-running broker so no process
  outlives the test session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

READY_PREFIX = "tierlog ready:"

#: Where every test and bench process keeps Hypothesis's files. kio registers Hypothesis
#: strategies at import whenever Hypothesis is installed (it is, for the property tests),
#: and Hypothesis then builds its Unicode tables under ``.hypothesis`` of the process's
#: working directory: about 1.7 s in every broker, CLI or Spark worker started in a fresh
#: directory. One shared directory builds them once.
HYPOTHESIS_DIR = Path(__file__).resolve().parents[2] / ".hypothesis"

TEST_OVERRIDES: dict[str, str] = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
}


class BrokerStartError(RuntimeError):
    pass


class BrokerProcess:
    def __init__(
        self,
        base_dir: Path | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        config_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        use_test_defaults: bool = True,
    ) -> None:
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="tierlog-broker-"))
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.base_dir / "data"
        self.overrides: dict[str, str] = dict(TEST_OVERRIDES) if use_test_defaults else {}
        self.overrides.setdefault("log.dirs", str(self.log_dir))
        self.overrides.setdefault("listeners", "PLAINTEXT://127.0.0.1:0")
        self.overrides.setdefault("metrics.listener", "http://127.0.0.1:0")
        self.overrides.update(overrides or {})
        self.config_file = config_file
        self.env = dict(env) if env is not None else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.metrics_url = ""
        self.port: int | None = None
        self.starts = 0
        self._out_path = self.base_dir / "broker.stdout"
        self._err_path = self.base_dir / "broker.stderr"

    # ---- lifecycle ----------------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "tierlog", "serve"]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        overrides = dict(self.overrides)
        if self.port is not None and overrides["listeners"].endswith(":0"):
            overrides["listeners"] = overrides["listeners"][:-2] + f":{self.port}"
        for k, v in overrides.items():
            cmd += ["--override", f"{k}={v}"]
        for name in filter(None, os.environ.get("TIERLOG_TEST_DEBUG", "").split(",")):
            cmd += ["--debug", name]
        return cmd

    def start(self, timeout_s: float = 60.0) -> BrokerProcess:
        if self.running:
            raise RuntimeError("broker already running")
        self.starts += 1
        out = open(self._out_path, "wb")  # noqa: SIM115 - handed to the child
        err = open(self._err_path, "ab")  # noqa: SIM115
        err.write(f"\n----- start #{self.starts} -----\n".encode())
        err.flush()
        env = dict(os.environ)
        env.update(self.env or {})
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(HYPOTHESIS_DIR))
        try:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=err,
                cwd=self.base_dir,
                env=env,
                start_new_session=True,
            )
        finally:
            out.close()
            err.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self._ready_line()
            if line is not None:
                fields = dict(f.split("=", 1) for f in line[len(READY_PREFIX) :].split())
                self.bootstrap = fields["bootstrap"]
                self.metrics_url = fields["metrics"]
                self.port = int(self.bootstrap.rsplit(":", 1)[1])
                return self
            if self.proc.poll() is not None:
                raise BrokerStartError(
                    f"broker exited with {self.proc.returncode} before becoming ready:\n"
                    + self.stderr[-4000:]
                )
            time.sleep(0.02)
        self.kill()
        raise BrokerStartError(f"broker not ready after {timeout_s}s:\n" + self.stderr[-4000:])

    def _ready_line(self) -> str | None:
        try:
            text = self._out_path.read_text(errors="replace")
        except FileNotFoundError:
            return None
        for line in text.splitlines():
            if line.startswith(READY_PREFIX):
                return line
        return None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait: the graceful shutdown path. Returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError(f"broker ignored SIGTERM for {timeout_s}s") from None
        return int(self.proc.returncode)

    def kill(self) -> None:
        """SIGKILL: a crash, without flush, checkpoints or clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def restart(self, *, kill: bool = False, timeout_s: float = 60.0) -> BrokerProcess:
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout_s)

    def close(self) -> None:
        self.kill()

    # ---- output -------------------------------------------------------------------------
    @property
    def stdout(self) -> str:
        return self._out_path.read_text(errors="replace") if self._out_path.exists() else ""

    @property
    def stderr(self) -> str:
        return self._err_path.read_text(errors="replace") if self._err_path.exists() else ""

    @property
    def host_port(self) -> tuple[str, int]:
        host, port = self.bootstrap.rsplit(":", 1)
        return host, int(port)

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the broker's Prometheus samples called ``name`` with ``labels``."""
        with urllib.request.urlopen(self.metrics_url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        return sum(
            float(sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
        )


def serve_to_exit(
    log_dir: Path, overrides: Mapping[str, str], timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``tierlog serve`` run until it exits, output captured: for a start that must fail
    (a bad key, damaged state). The listener and the metrics endpoint default to free or no
    ports so that a start that wrongly succeeds fails the test by its timeout, not by a
    port clash."""
    args = {"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0"}
    args |= {"metrics.listener": "", **overrides}
    command = [sys.executable, "-m", "tierlog", "serve"]
    for key, value in args.items():
        command += ["--override", f"{key}={value}"]
    return subprocess.run(command, capture_output=True, check=False, text=True, timeout=timeout_s)
