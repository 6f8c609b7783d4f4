"""``make cluster``: a local ZooKeeper and three brokers in the foreground; Ctrl-C stops all.

Brokers 1-3 listen on 127.0.0.1:9092-9094 with metrics on 9404-9406, keep their data under
``./data-cluster/broker-<id>`` and share the chroot ``/tierlog`` of a ZooKeeper on a free
port (its data is under ``./data-cluster/zookeeper``). Each broker's output goes to
``./data-cluster/broker-<id>.log``. Tiered topics go to one ``file://`` remote tier that all
three share, ``./data-cluster/remote``. The data survives a restart of the script; delete
the directory to start from nothing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.zookeeper import ZooKeeperServer

ROOT = Path("data-cluster")
BROKERS = (1, 2, 3)


def start_broker(broker_id: int, zk_connect: str) -> subprocess.Popen[bytes]:
    overrides = {
        "broker.id": str(broker_id),
        "zookeeper.connect": f"{zk_connect}/tierlog",
        "listeners": f"PLAINTEXT://127.0.0.1:{9091 + broker_id}",
        "metrics.listener": f"http://127.0.0.1:{9403 + broker_id}",
        "log.dirs": str(ROOT / f"broker-{broker_id}"),
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        # one remote tier that every broker reaches, as a cluster needs (a replica reads what
        # another leader uploaded): a file:// store shared on this machine
        "rsm.config.storage.url": (ROOT / "remote").absolute().as_uri(),
    }
    cmd = [sys.executable, "-m", "tierlog", "serve"]
    for key, value in overrides.items():
        cmd += ["--override", f"{key}={value}"]
    out = (ROOT / f"broker-{broker_id}.log").open("ab")
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def main() -> int:
    ROOT.mkdir(exist_ok=True)
    zk = ZooKeeperServer(ROOT / "zookeeper", tick_time_ms=2000)
    zk.start()
    print(f"ZooKeeper at {zk.connect} (chroot /tierlog)", flush=True)
    brokers = {i: start_broker(i, zk.connect) for i in BROKERS}
    print("brokers 1-3 on 127.0.0.1:9092-9094; try: kcat -L -b 127.0.0.1:9092", flush=True)
    print(f"logs in {ROOT}/broker-<id>.log; Ctrl-C stops everything", flush=True)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping:
            for i, proc in brokers.items():
                if proc.poll() is not None:
                    print(f"broker {i} exited with {proc.returncode}; see its log", flush=True)
                    stopping = True
            time.sleep(0.5)
    finally:
        for proc in brokers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in brokers.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        zk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
