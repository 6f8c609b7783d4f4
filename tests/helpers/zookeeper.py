"""A real ZooKeeper server (Debian's ``zookeeper`` package, installed by ``make install``).

Usage (``tests/cluster/conftest.py`` wraps this in fixtures)::

    from helpers.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tmp_path / "zk")
    server.start()              # returns once the server answers ``ruok`` with ``imok``
    server.connect              # "127.0.0.1:<port>", for zookeeper.connect or kazoo
    server.stop()               # SIGTERM, then SIGKILL if it lingers

What it does:

* Runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` (standalone, no quorum) with the
  jar of Debian's package, whose manifest carries the class path of its dependencies. The
  config file gives a temp ``dataDir``, a free port on 127.0.0.1, the admin HTTP server
  off (it would take port 8080) and the ``ruok``/``srvr`` four-letter words on.
* ``tickTime`` is 100 ms so that sessions may be as short as 200 ms: session expiry tests
  then take well under a second. ``maxSessionTimeout`` stays at Kafka's 18 s default.
* Readiness is polled with a deadline (``ruok`` on the client port), never slept for.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SERVER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperUnavailable(RuntimeError):
    """Java or Debian's ZooKeeper package is missing (run ``make install`` as root)."""


def zookeeper_available() -> bool:
    return ZOOKEEPER_JAR.is_file() and shutil.which("java") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter_word(port: int, word: str, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole answer ('' if refused)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    def __init__(self, root: Path, tick_time_ms: int = 100) -> None:
        self.root = root
        self.tick_time_ms = tick_time_ms
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_text(self) -> str:
        path = self.root / "zookeeper.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, timeout_s: float = 60.0) -> None:
        if not zookeeper_available():
            raise ZooKeeperUnavailable(f"{ZOOKEEPER_JAR} or java not found; run `make install`")
        data_dir = self.root / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        if self.port == 0:
            self.port = free_port()
        config = self.root / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxSessionTimeout=18000\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,cons\n"
        )
        log = (self.root / "zookeeper.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "java",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                str(ZOOKEEPER_JAR),
                SERVER_MAIN,
                str(config),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while four_letter_word(self.port, "ruok") != "imok":
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode}:\n{self.log_text[-3000:]}"
                )
            if time.monotonic() >= deadline:
                self.stop()
                raise RuntimeError(f"ZooKeeper did not answer within {timeout_s}s")
            time.sleep(0.05)

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def expire_session(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Expire another client's session, as a server would after its timeout: a second
    connection joins the session with its id and password and closes it. The first client
    then sees its session lost (and kazoo opens a new one)."""
    from kazoo.client import KazooClient

    intruder = KazooClient(hosts=hosts, client_id=client_id)
    intruder.start(timeout=15)
    intruder.stop()
    intruder.close()
